//! The vocabulary against the official NKI 2.32 API tables in `tests/data/`.
//!
//! Every function of `nki.isa`, `nki.language` and `nki.collectives` and every
//! `NkiTensor` method must have a spec row whose parameters are the official
//! ones in the official order. A row nki-rs implements must be callable from a
//! kernel, and the emitted call must use the official keywords in order; a
//! Planned row must be refused with the "not implemented yet" message. The
//! number of Planned rows is pinned, so work on the vocabulary moves it (to 0).

use crate::json::Json;
use crate::tests::{python_for, python_of};
use nki_spec::hw::Generation;
use nki_spec::{Kind, Module, Op, OpClass, Spaces};

const SIGNATURES: &str = include_str!("../../tests/data/nki-api-signatures.json");
const NAMES: &str = include_str!("../../tests/data/nki-api-names.json");

/// Names of the official API the test does not walk, with the reason.
const EXCLUDED: &[(&str, &str)] = &[
    ("nki.jit", "host-side decorator: a kernel is the #[nki_kernel] function itself"),
    ("nki.simulate", "host-side CPU simulator: nki-rs's emulator takes its place (Launch)"),
];

/// Official Planned rows left; lower it as ops are implemented.
const PLANNED: usize = 0;

/// The walked names: `nki.*` functions and `NkiTensor` methods, with their official parameters.
fn official() -> Vec<(String, Vec<String>)> {
    let sigs = Json::parse(SIGNATURES).expect("signatures table parses");
    let names = Json::parse(NAMES).expect("names table parses");
    let mut out = Vec::new();
    for module in ["nki", "nki.isa", "nki.language", "nki.collectives"] {
        let Some(Json::Obj(members)) = names.get(module) else { panic!("{module} missing from the names table") };
        for (name, kind) in members {
            if kind != &Json::Str("function".into()) {
                continue;
            }
            let full = format!("{module}.{name}");
            if EXCLUDED.iter().any(|(n, _)| *n == full) {
                continue;
            }
            let params = sigs.get(&full).and_then(|s| s.get("params")).unwrap_or_else(|| panic!("{full} has no signature"));
            out.push((full, params.strings().into_iter().map(str::to_string).collect()));
        }
    }
    let Json::Obj(all) = &sigs else { panic!("signatures table is an object") };
    for (full, s) in all {
        if full.starts_with("nki.language.NkiTensor.") {
            let params = s.get("params").map(Json::strings).unwrap_or_default();
            out.push((full.clone(), params.into_iter().filter(|p| *p != "self").map(str::to_string).collect()));
        }
    }
    out
}

fn row(full: &str) -> Option<&'static Op> {
    nki_spec::ops().find(|o| o.official_name() == full)
}

/// A kernel that declares one value of each kind a call may need.
const PRELUDE: &str = "let sb = nl::ndarray([128, 8], nl::float32, nl::sbuf); \
    let ps = nl::ndarray([128, 8], nl::float32, nl::psum); \
    let sh = nl::ndarray([128, 8], nl::float32, nl::shared_hbm); \
    let reg = nisa::register_alloc(0); \
    let rg = ncc::ReplicaGroup([[0, 1]]);";

/// Calls whose rules need particular shapes; the others are synthesized from their kinds.
const CALLS: &[(&str, &str)] = &[
    ("nki.language.broadcast_to", "let c = nl::ndarray([128, 1], nl::float32); let v = nl::broadcast_to(c, [128, 8])"),
    ("nki.language.gather_flattened", "let i = nl::ndarray([128, 4], nl::uint32); let v = nl::gather_flattened(sb, i)"),
    ("nki.language.load_transpose2d", "let v = nl::load_transpose2d(x)"),
    ("nki.language.bitwise_and", "let i = nl::ndarray([128, 8], nl::int32); let v = nl::bitwise_and(i, 1)"),
    ("nki.language.bitwise_or", "let i = nl::ndarray([128, 8], nl::int32); let v = nl::bitwise_or(i, 1)"),
    ("nki.language.bitwise_xor", "let i = nl::ndarray([128, 8], nl::int32); let v = nl::bitwise_xor(i, 1)"),
    ("nki.language.left_shift", "let i = nl::ndarray([128, 8], nl::int32); let v = nl::left_shift(i, 1)"),
    ("nki.language.right_shift", "let i = nl::ndarray([128, 8], nl::int32); let v = nl::right_shift(i, 1)"),
    ("nki.language.invert", "let i = nl::ndarray([128, 8], nl::int32); let v = nl::invert(i)"),
    ("nki.language.matmul", "let v = nl::matmul(sb, sb, transpose_x = true)"),
    ("nki.isa.nc_matmul", "let d = nl::ndarray([8, 8], nl::float32, nl::psum); nisa::nc_matmul(d, sb, sb)"),
    ("nki.isa.nc_transpose", "let d = nl::ndarray([8, 8], nl::float32, nl::sbuf); nisa::nc_transpose(d, sb[s![0..8, 0..8]])"),
    ("nki.isa.tensor_reduce", "let d = nl::ndarray([128, 1], nl::float32, nl::sbuf); nisa::tensor_reduce(d, nl::add, sb, 1)"),
    ("nki.isa.dma_transpose", "let d = nl::ndarray([8, 128], nl::float32, nl::sbuf); nisa::dma_transpose(d, x)"),
    ("nki.isa.bn_stats", "let d = nl::ndarray([128, 6], nl::float32, nl::sbuf); nisa::bn_stats(d, sb)"),
    (
        "nki.isa.bn_aggr",
        "let s6 = nl::ndarray([128, 6], nl::float32, nl::sbuf); let d = nl::ndarray([128, 2], nl::float32, nl::sbuf); nisa::bn_aggr(d, s6)",
    ),
    (
        "nki.isa.range_select",
        "let b = nl::ndarray([128, 1], nl::float32, nl::sbuf); nisa::range_select(sb, sb, nl::greater_equal, nl::less, b, b)",
    ),
    ("nki.isa.affine_select", "nisa::affine_select(sb, [[1, 8]], 0, sb, 0.0)"),
    ("nki.isa.core_barrier", "nisa::core_barrier(sh, [0, 1])"),
    ("nki.isa.nc_stream_shuffle", "nisa::nc_stream_shuffle(sb, sb, [0; 32])"),
    ("nki.isa.nc_find_index8", "let d = nl::ndarray([128, 8], nl::uint32, nl::sbuf); nisa::nc_find_index8(d, sb, sb)"),
    ("nki.isa.tensor_copy_predicated", "let m = nl::ndarray([128, 8], nl::uint8, nl::sbuf); nisa::tensor_copy_predicated(sb, sb, m)"),
    ("nki.isa.select_reduce", "let m = nl::ndarray([128, 8], nl::uint8, nl::sbuf); nisa::select_reduce(sb, m, sb, 0.0)"),
    ("nki.isa.nonzero_with_count", "let d = nl::ndarray([128, 9], nl::int32, nl::sbuf); nisa::nonzero_with_count(d, sb)"),
    ("nki.isa.nc_n_gather", "let i = nl::ndarray([128, 8], nl::uint32, nl::sbuf); nisa::nc_n_gather(sb, sb, i)"),
    ("nki.isa.rng", "let d = nl::ndarray([128, 8], nl::uint32, nl::sbuf); nisa::rng(d)"),
    ("nki.isa.rand2", "nisa::rand2(sb, 0.0, 1.0)"),
    ("nki.language.random_seed", "let d = nl::ndarray([1, 1], nl::int32, nl::sbuf); nl::random_seed(d)"),
    ("nki.isa.rand_get_state", "let d = nl::ndarray([128, 6], nl::uint32, nl::sbuf); nisa::rand_get_state(d)"),
    ("nki.isa.rand_set_state", "let d = nl::ndarray([128, 6], nl::uint32, nl::sbuf); nisa::rand_set_state(d)"),
    ("nki.isa.set_rng_seed", "let d = nl::ndarray([1, 1], nl::uint32, nl::sbuf); nisa::set_rng_seed(d)"),
    (
        "nki.isa.sequence_bounds",
        "let s = nl::ndarray([1, 8], nl::float32, nl::sbuf); let d = nl::ndarray([1, 2, 8], nl::float32, nl::sbuf); nisa::sequence_bounds(d, s)",
    ),
    (
        "nki.isa.tensor_partition_reduce",
        "let d = nl::ndarray([1, 8], nl::float32, nl::sbuf); nisa::tensor_partition_reduce(d, nl::add, sb)",
    ),
    ("nki.isa.activate2", "nisa::activate2(sb, nl::exp, sb, 2.0, 1.0, nl::multiply, nl::add)"),
    (
        "nki.isa.quantize_mx",
        "let s = nl::ndarray([32, 8], nl::bfloat16, nl::sbuf); let q = nl::ndarray([32, 2], nl::float8_e4m3fn_x4, nl::sbuf); let e = nl::ndarray([4, 2], nl::float8_e8m0fnu, nl::sbuf); nisa::quantize_mx(q, s, e)",
    ),
    (
        "nki.isa.nc_matmul_mx",
        "let q = nl::ndarray([32, 8], nl::float8_e4m3fn_x4, nl::sbuf); let e = nl::ndarray([4, 8], nl::uint8, nl::sbuf); let d = nl::ndarray([8, 8], nl::float32, nl::psum); nisa::nc_matmul_mx(d, q, q, e, e)",
    ),
    (
        "nki.isa.topk",
        "let s = nl::ndarray([128, 8], nl::bfloat16, nl::sbuf); let i = nl::ndarray([128, 8], nl::uint32, nl::sbuf); nisa::topk(s, i, s, 64)",
    ),
    ("nki.collectives.all_to_all", "ncc::all_to_all([sh], [sh], rg, 0)"),
    ("nki.collectives.collective_permute", "ncc::collective_permute([sh], [sh], [[0, 1]])"),
    ("nki.collectives.reduce_scatter", "ncc::reduce_scatter([sb], [sb], rg, 0, nl::add)"),
    (
        "nki.isa.local_gather",
        "let i = nl::ndarray([128, 1], nl::uint16, nl::sbuf); nisa::local_gather(sb, sb, i, num_elem_per_idx = 2, num_valid_indices = 4)",
    ),
    ("nki.language.ndarray", "let t = nl::ndarray([128, 8], nl::float32)"),
    ("nki.language.affine_range", "for i in nl::affine_range(0, 2, 1) {}"),
    ("nki.language.sequential_range", "for i in nl::sequential_range(0, 2, 1) {}"),
    ("nki.language.static_range", "for i in nl::static_range(0, 2, 1) {}"),
    ("nki.language.dynamic_range", "for i in nl::dynamic_range(0, reg, 1) {}"),
    ("nki.language.fori_loop", "nl::fori_loop(0, reg, |i| {}, 1)"),
    ("nki.language.while_loop", "nl::while_loop(reg, |r| r)"),
    ("nki.language.no_reorder", "nl::no_reorder(|| {})"),
    ("nki.language.NkiTensor.reshape", "let v = sb.reshape([128, 2, 4])"),
    ("nki.language.NkiTensor.permute", "let t = nl::ndarray([128, 2, 4], nl::float32); let v = t.permute([0, 2, 1])"),
    ("nki.language.NkiTensor.squeeze_dim", "let t = nl::ndarray([128, 1, 4], nl::float32); let v = t.squeeze_dim(1)"),
    ("nki.language.NkiTensor.flatten_dims", "let t = nl::ndarray([128, 2, 4], nl::float32); let v = t.flatten_dims(1, 2)"),
    ("nki.language.NkiTensor.reshape_dim", "let v = sb.reshape_dim(1, [2, 4])"),
    (
        "nki.language.NkiTensor.rearrange",
        "let v = sb.rearrange((\"p\", (\"a\", \"b\")), (\"p\", \"b\", \"a\"), fixed_sizes = [(\"a\", 2)])",
    ),
    (
        "nki.language.NkiTensor.vector_select",
        "let i = nl::ndarray([128, 1], nl::int32, nl::sbuf); nisa::dma_copy(sb, sh.vector_select(0, i))",
    ),
    ("nki.language.NkiTensor.indirect", "let ix = nl::ndarray([128, 2], nl::int32, nl::sbuf); let v = sb.indirect(ix, num_elem = 4)"),
    ("nki.language.NkiTensor.expand_dim", "let v = sb.expand_dim(1)"),
    ("nki.language.NkiTensor.select", "let v = sb.select(1, 0)"),
    ("nki.language.NkiTensor.slice", "let v = sb.slice(1, 0, 4)"),
    ("nki.language.NkiTensor.broadcast", "let c = nl::ndarray([128, 1], nl::float32, nl::sbuf); let v = c.broadcast(1, 8)"),
];

/// An argument of `kind` for a synthesized call.
fn arg(kind: Kind) -> &'static str {
    match kind {
        Kind::Tensor(Spaces::Psum) => "ps",
        Kind::Tensor(Spaces::SharedHbmOrSbuf) => "sh",
        Kind::Tensor(Spaces::Dma) => "x",
        Kind::Tensor(_) => "sb",
        Kind::Operand | Kind::Float => "1.0",
        Kind::Op(OpClass::Act) => "nl::exp",
        Kind::Op(_) => "nl::add",
        Kind::Int => "1",
        Kind::Bool | Kind::OptBool => "false",
        Kind::Dtype => "nl::float32",
        Kind::Buffer => "nl::sbuf",
        Kind::Str => "\"n\"",
        Kind::Pattern => "[[1, 8]]",
        Kind::Ints => "[1]",
        Kind::Floats => "[1.0]",
        Kind::Axis => "1",
        Kind::Constant => "[[1.0, 2.0]]",
        Kind::Enum(_) => "nisa::engine::unknown",
        Kind::Pair => "(0, 0)",
        Kind::RegisterSource => "0",
        Kind::DynamicOffset | Kind::Register => "reg",
        Kind::ReplicaGroup => "rg",
        Kind::Groups => "[[0, 1]]",
        Kind::TensorLists => "[[sb]]",
        Kind::Tensors => "[sb]",
        Kind::Names => "(\"a\", \"b\")",
        Kind::Sizes => "[(\"a\", 1)]",
        Kind::Callable | Kind::Planned => "0",
    }
}

/// The call of `op` with its required parameters passed positionally.
fn call_of(op: &Op) -> String {
    if let Some((_, c)) = CALLS.iter().find(|(n, _)| *n == op.official_name()) {
        return c.to_string();
    }
    let args: Vec<&str> = op.params.iter().filter(|p| p.required).map(|p| arg(p.kind)).collect();
    match op.module {
        Module::Tensor if op.binding().is_some_and(|b| b.property) => format!("let v = sb.{}", op.name),
        Module::Tensor => format!("let v = sb.{}({})", op.name, args.join(", ")),
        _ => {
            let raw = if ["mod", "where"].contains(&op.name) { "r#" } else { "" };
            format!("let v = {}::{raw}{}({})", op.module.dsl(), op.name, args.join(", "))
        }
    }
}

fn kernel(call: &str) -> String {
    format!("fn k(x: Hbm) {{ {PRELUDE} {call}; }}")
}

/// The keyword names of the last call of `callee` in `py` (`nisa.dma_copy(dst=a, src=b)` -> dst, src).
fn keywords(py: &str, callee: &str) -> Option<Vec<String>> {
    let at = py.rfind(&format!("{callee}("))? + callee.len() + 1;
    let mut depth = 0;
    let mut out = Vec::new();
    let mut token = String::new();
    for c in py[at..].chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' => depth -= 1,
            '=' if depth == 0 && !token.is_empty() => {
                out.push(token.trim().to_string());
                token.clear();
                continue;
            }
            ',' if depth == 0 => {
                token.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 && (c.is_alphanumeric() || c == '_' || c == ' ') {
            token.push(c);
        } else {
            token.clear();
        }
    }
    Some(out)
}

#[test]
fn every_official_function_and_method_has_a_row_with_its_parameters() {
    let official = official();
    assert!(official.len() > 180, "the tables list {} names", official.len());
    let mut problems = Vec::new();
    for (full, params) in &official {
        match row(full) {
            None => problems.push(format!("{full}: no spec row")),
            Some(op) => {
                let ours: Vec<&str> = op.params.iter().map(|p| p.name).collect();
                if ours != *params {
                    problems.push(format!("{full}: spec parameters {ours:?}, official {params:?}"));
                }
                if op.summary.is_empty() {
                    problems.push(format!("{full}: no summary"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn implemented_rows_are_callable_with_the_official_keywords_and_planned_rows_are_refused() {
    let mut problems = Vec::new();
    let mut planned = Vec::new();
    for (full, params) in official() {
        let Some(op) = row(&full) else { continue };
        let src = kernel(&call_of(op));
        // A generation that has the op (the default target when it does).
        let target = if op.generations.contains(&Generation::Trn2) { Generation::Trn2 } else { op.generations[0] };
        match (op.binding(), python_for(&src, target)) {
            (Some(b), Ok(py)) => {
                if b.property || b.positional {
                    continue;
                }
                let callee = if op.module == Module::Tensor { format!(".{}", op.name) } else { op.py.to_string() };
                let kws = keywords(&py, &callee).unwrap_or_default();
                let mut rest = params.iter();
                if kws.is_empty() && op.params.iter().any(|p| p.required) {
                    problems.push(format!("{full}: no keywords in `{py}`"));
                }
                for k in &kws {
                    if !rest.any(|p| p == k) {
                        problems.push(format!("{full}: emitted keyword `{k}` is not official or out of order ({params:?})"));
                    }
                }
            }
            (Some(_), Err(errs)) => problems.push(format!("{full}: `{src}` is refused: {errs:?}")),
            (None, Ok(_)) => problems.push(format!("{full}: Planned, but a kernel calling it compiles")),
            (None, Err(errs)) => {
                if !errs.iter().any(|e| e.contains("does not implement it yet")) {
                    problems.push(format!("{full}: Planned, refused without saying so: {errs:?}"));
                }
                planned.push(full);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!("{} official names are Planned: {}", planned.len(), planned.join(", "));
    assert_eq!(planned.len(), PLANNED, "Planned rows changed: update PLANNED");
}

#[test]
fn an_op_of_other_generations_is_refused_naming_them() {
    let src = kernel("let d = nl::ndarray([128, 8], nl::float32, nl::sbuf); nisa::exponential(d, sb)");
    assert!(python_for(&src, Generation::Trn3).is_ok());
    let errs = python_of(&src).unwrap_err();
    assert!(errs.iter().any(|e| e.contains("`nki.isa.exponential` exists on trn3 only, but the kernel targets trn2")), "{errs:?}");
}

#[test]
fn keywords_are_read_at_the_call_depth_only() {
    let py = "t = x\nnisa.dma_copy(dst=a[0:1, nl.ds(start=1, size=2)], src=f(y=b))";
    assert_eq!(keywords(py, "nisa.dma_copy"), Some(vec!["dst".to_string(), "src".to_string()]));
    assert_eq!(keywords(py, "nisa.memset"), None);
}

#[test]
fn excluded_names_are_official_and_host_side() {
    let names = Json::parse(NAMES).expect("names table parses");
    for (full, why) in EXCLUDED {
        let (module, name) = full.rsplit_once('.').expect("qualified name");
        assert_eq!(names.get(module).and_then(|m| m.get(name)), Some(&Json::Str("function".into())), "{full}");
        assert!(row(full).is_none() && !why.is_empty(), "{full} is excluded but has a row");
    }
}
