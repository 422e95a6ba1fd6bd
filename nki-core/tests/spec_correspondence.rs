//! The emulator's names agree with the spec tables of `nki-spec`: dtypes,
//! operator tokens, `nl.tile_size`, the `nisa` enums. (Options structs are
//! checked against their rows when the crate compiles, by `#[spec_options]`.)

use nki_core::nisa::{DgeMode, DmaEngine, Engine, MatmulPerfMode, OobMode, ReduceCmd};
use nki_core::nl::{NlOp, tile_size};
use nki_core::{Dtype, nisa};
use nki_spec::constants::{ACT_TOKENS, ALU_TOKENS, ENUMS, NC_VERSIONS, TILE_SIZE, implemented_dtypes};
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
