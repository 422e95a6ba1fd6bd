//! The emulator's names agree with the spec tables of `nki-spec`: dtypes,
//! operator tokens, `nl.tile_size`, the `nisa` enums. (Options structs are
//! checked against their rows when the crate compiles, by `#[spec_options]`.)

use nki_core::nisa::{DgeMode, DmaEngine, Engine, MatmulPerfMode, OobMode, ReduceCmd};
use nki_core::nl::{NlOp, tile_size};
use nki_core::{Dtype, nisa};
use nki_spec::constants::{ACT_TOKENS, ALU_TOKENS, ENUMS, NC_VERSIONS, TILE_SIZE, implemented_dtypes};
use nki_spec::{Family, Module, Op, Rule};
use std::collections::BTreeSet;

fn set<'a>(it: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    it.into_iter().map(str::to_string).collect()
}

/// `ResetReduce` -> `reset_reduce`.
fn snake(debug: String) -> String {
    let mut out = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

#[test]
fn dtypes_are_the_spec_implemented_dtypes() {
    let ours: BTreeSet<String> = Dtype::ALL.iter().map(|d| d.python_name().trim_start_matches("nl.").to_string()).collect();
    assert_eq!(ours, set(implemented_dtypes()));
}

#[test]
fn operator_tokens_are_the_spec_tokens_with_the_same_arity() {
    let unary: BTreeSet<String> = NlOp::ALL.iter().filter(|o| o.is_unary()).map(|o| o.name().to_string()).collect();
    let binary: BTreeSet<String> = NlOp::ALL.iter().filter(|o| o.is_binary()).map(|o| o.name().to_string()).collect();
    assert_eq!(unary, set(ACT_TOKENS.iter().copied()));
    assert_eq!(binary, set(ALU_TOKENS.iter().copied()));
}

#[test]
fn tile_sizes_are_the_spec_values() {
    let ours = [
        ("pmax", tile_size::pmax),
        ("psum_fmax", tile_size::psum_fmax),
        ("psum_bank_fmax", tile_size::psum_bank_fmax),
        ("psum_bank_fmax_bytes", tile_size::psum_bank_fmax_bytes),
        ("gemm_stationary_fmax", tile_size::gemm_stationary_fmax),
        ("gemm_moving_fmax", tile_size::gemm_moving_fmax),
        ("bn_stats_fmax", tile_size::bn_stats_fmax),
    ];
    assert_eq!(ours.len(), TILE_SIZE.len());
    for (name, v) in TILE_SIZE {
        assert_eq!(ours.iter().find(|(n, _)| n == name).map(|&(_, x)| x), Some(*v), "nl.tile_size.{name}");
    }
    for (name, v) in NC_VERSIONS {
        let ours = match *name {
            "gen2" => nisa::nc_version::gen2,
            "gen3" => nisa::nc_version::gen3,
            "gen4" => nisa::nc_version::gen4,
            other => panic!("nisa.nc_version.{other} has no emulator constant"),
        };
        assert_eq!(ours, *v);
    }
}

#[test]
fn nisa_enums_have_the_spec_members() {
    let ours: [(&str, Vec<String>); 6] = [
        (
            "engine",
            [Engine::Tensor, Engine::Vector, Engine::Scalar, Engine::Gpsimd, Engine::Dma, Engine::Sync, Engine::Unknown]
                .map(|e| snake(format!("{e:?}")))
                .to_vec(),
        ),
        (
            "reduce_cmd",
            [ReduceCmd::Idle, ReduceCmd::Reset, ReduceCmd::Reduce, ReduceCmd::ResetReduce, ReduceCmd::LoadReduce]
                .map(|e| snake(format!("{e:?}")))
                .to_vec(),
        ),
        ("dge_mode", [DgeMode::Unknown, DgeMode::Swdge, DgeMode::Hwdge, DgeMode::None].map(|e| snake(format!("{e:?}"))).to_vec()),
        ("dma_engine", [DmaEngine::Dma, DmaEngine::GpsimdDma].map(|e| snake(format!("{e:?}"))).to_vec()),
        ("oob_mode", [OobMode::Error, OobMode::Skip].map(|e| snake(format!("{e:?}"))).to_vec()),
        ("matmul_perf_mode", [MatmulPerfMode::None, MatmulPerfMode::DoubleRow].map(|e| snake(format!("{e:?}"))).to_vec()),
    ];
    let implemented: Vec<_> = ENUMS.iter().filter(|e| e.implemented).collect();
    assert_eq!(implemented.len(), ours.len());
    for e in implemented {
        let mine = ours.iter().find(|(n, _)| *n == e.name).map(|(_, m)| set(m.iter().map(String::as_str)));
        assert_eq!(mine, Some(set(e.members.iter().map(|(m, _)| *m))), "nisa.{}", e.name);
    }
}

/// The layers' files, from the workspace root.
const RULES: &str = "nki-macros/src/check/rules";
const EMULATOR: &str = "nki-core/src/isa";
const EXECUTOR: &str = "tests/python/nki_harness/fake_nki/isa";

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The stems of a folder's files ending in `ext`.
fn stems(dir: &std::path::Path, ext: &str) -> BTreeSet<String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    entries.filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(ext).map(str::to_string)).collect()
}

/// The module a rule's dispatcher arm names (`top8` for `Rule::Max8 => top8::max8,`).
fn dispatched_to(dispatcher: &str, rule: Rule) -> String {
    let arm = format!("Rule::{rule:?} => ");
    let line = dispatcher.lines().find_map(|l| l.trim().strip_prefix(arm.as_str())).unwrap_or_else(|| panic!("no arm for {arm}"));
    line.rsplit_once("::").map_or("", |(module, _)| module).to_string()
}

/// Every `nki.isa` op family has one file stem in every layer: the emulator
/// defines the family's ops in `isa/<family>.rs`, the executor in
/// `fake_nki/isa/<family>.py`, and a static rule that only the family's ops use
/// is dispatched to `check/rules/<family>.rs` (a rule several families share to
/// the checker's shared `operands`). No layer holds a family file the spec does
/// not name.
#[test]
fn every_op_family_has_one_file_stem_in_every_layer() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let dispatcher = read(&root.join(RULES).join("mod.rs"));
    let isa: Vec<&Op> = nki_spec::ops().filter(|o| o.module == Module::Isa).collect();
    for op in &isa {
        let family = op.family.unwrap_or_else(|| panic!("nisa.{} names no family", op.name));
        let stem = family.stem();
        if op.binding().is_some() {
            let emulator = read(&root.join(EMULATOR).join(format!("{stem}.rs")));
            assert!(emulator.contains(&format!("pub fn {}(", op.name)), "nisa.{} is not emulated in {EMULATOR}/{stem}.rs", op.name);
            let executor = read(&root.join(EXECUTOR).join(format!("{stem}.py")));
            assert!(executor.contains(&format!("\ndef {}(", op.name)), "nisa.{} is not executed in {EXECUTOR}/{stem}.py", op.name);
        }
        if let Some(rule) = op.rule {
            let families: BTreeSet<&str> =
                nki_spec::ops().filter(|o| o.rule == Some(rule)).filter_map(|o| o.family).map(Family::stem).collect();
            let module = dispatched_to(&dispatcher, rule);
            if families.len() == 1 {
                assert_eq!(module, stem, "Rule::{rule:?} of nisa.{} belongs in {RULES}/{stem}.rs", op.name);
                assert!(root.join(RULES).join(format!("{stem}.rs")).is_file(), "{RULES}/{stem}.rs");
            } else {
                assert_eq!(module, "operands", "Rule::{rule:?}, shared by {families:?}, belongs in check/operands.rs");
            }
        }
    }
    let named: BTreeSet<String> = Family::ALL.iter().map(|f| f.stem().to_string()).collect();
    let used: BTreeSet<String> = isa.iter().filter_map(|o| o.family).map(|f| f.stem().to_string()).collect();
    assert_eq!(used, named, "every family has an op");
    // Files that are not families: the dispatcher and the rules of nl / ncc calls;
    // the emulator's and the executor's shared machinery.
    let rules: BTreeSet<String> =
        stems(&root.join(RULES), ".rs").into_iter().filter(|s| s != "mod" && s != "collectives" && !s.starts_with("nl_")).collect();
    assert!(rules.is_subset(&named), "rule files that are no family: {:?}", rules.difference(&named).collect::<Vec<_>>());
    let machinery = set(["mod", "alu", "enums", "exec", "operand", "tile", "xorwow", "__init__", "constants"]);
    for (dir, ext) in [(EMULATOR, ".rs"), (EXECUTOR, ".py")] {
        let files: BTreeSet<String> = stems(&root.join(dir), ext).difference(&machinery).cloned().collect();
        assert_eq!(files, named, "the op files of {dir} are the spec's families");
    }
}
