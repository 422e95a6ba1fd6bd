//! Constants: dtypes, buffers, operator tokens, tile sizes and `nisa` enum members.

use super::OpClass;

/// What a constant path denotes.
#[derive(Clone, Debug, PartialEq)]
pub enum Constant {
    Dtype(&'static str),
    Buffer(&'static str),
    Op(OpClass, &'static str),
    Int(i64),
    Float(f64),
    /// An `nisa` enum member: (enum, member).
    Enum(&'static str, &'static str),
}

const DTYPES: &[&str] = &[
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e5m2",
    "int32",
    "uint32",
    "int16",
    "uint16",
    "int8",
    "uint8",
];
const BUFFERS: &[&str] = &["sbuf", "psum", "hbm", "private_hbm", "shared_hbm"];
const ALU: &[&str] = &[
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "power",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
];
const ACT: &[&str] =
    &["exp", "log", "copy", "reciprocal", "sqrt", "rsqrt", "square", "abs", "negative", "tanh", "sigmoid", "relu", "silu", "gelu"];
const TILE_SIZE: &[(&str, i64)] = &[
    ("pmax", 128),
    ("psum_fmax", 512),
    ("psum_bank_fmax", 512),
    ("psum_bank_fmax_bytes", 2048),
    ("gemm_stationary_fmax", 128),
    ("gemm_moving_fmax", 512),
];
/// `nisa` enums and their members.
pub const ENUMS: &[(&str, &[&str])] = &[
    ("engine", &["tensor", "vector", "scalar", "gpsimd", "dma", "sync", "unknown"]),
    ("reduce_cmd", &["idle", "reset", "reduce", "reset_reduce", "load_reduce"]),
    ("dge_mode", &["unknown", "swdge", "hwdge", "none"]),
    ("oob_mode", &["error", "skip"]),
    ("matmul_perf_mode", &["none", "double_row"]),
];

/// Resolves a constant path, e.g. `["nl", "float32"]`.
pub fn lookup_constant(path: &[String]) -> Option<Constant> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["nl", name] => {
            let hit = |list: &[&'static str]| list.iter().copied().find(|n| n == name);
            hit(DTYPES)
                .map(Constant::Dtype)
                .or_else(|| hit(BUFFERS).map(Constant::Buffer))
                .or_else(|| hit(ALU).map(|n| Constant::Op(OpClass::Alu, n)))
                .or_else(|| hit(ACT).map(|n| Constant::Op(OpClass::Act, n)))
        }
        ["nl", "tile_size", name] => TILE_SIZE.iter().find(|(n, _)| n == name).map(|&(_, v)| Constant::Int(v)),
        ["nisa", "nc_version", g] => match *g {
            "gen2" => Some(Constant::Int(2)),
            "gen3" => Some(Constant::Int(3)),
            "gen4" => Some(Constant::Int(4)),
            _ => None,
        },
        ["nisa", e, m] => {
            ENUMS.iter().find(|(en, _)| en == e).and_then(|(en, ms)| ms.iter().find(|x| *x == m).map(|x| Constant::Enum(en, x)))
        }
        ["f32", "MIN"] => Some(Constant::Float(f32::MIN as f64)),
        ["f32", "MAX"] => Some(Constant::Float(f32::MAX as f64)),
        _ => None,
    }
}

/// Every constant path (for suggestions).
pub fn constant_names() -> Vec<String> {
    let mut out: Vec<String> = DTYPES.iter().chain(BUFFERS).chain(ALU).chain(ACT).map(|n| format!("nl::{n}")).collect();
    out.extend(TILE_SIZE.iter().map(|(n, _)| format!("nl::tile_size::{n}")));
    for (e, ms) in ENUMS {
        out.extend(ms.iter().map(|m| format!("nisa::{e}::{m}")));
    }
    out
}
