//! Constants: dtypes, buffers, operator tokens, tile sizes and `nisa` enum
//! members, as the spec tables list them.

use nki_spec::OpClass;
use nki_spec::constants::{ACT_TOKENS, ALU_TOKENS, BUFFERS, ENUMS, NC_VERSIONS, TILE_SIZE, implemented_dtypes};

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

/// Resolves a constant path, e.g. `["nl", "float32"]`.
pub fn lookup_constant(path: &[String]) -> Option<Constant> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["nl", name] => {
            // Official names that are Rust keywords are written raw: `nl::r#mod`.
            let name = &name.strip_prefix("r#").unwrap_or(name);
            let hit = |list: &[&'static str]| list.iter().copied().find(|n| n == name);
            implemented_dtypes()
                .find(|n| n == name)
                .map(Constant::Dtype)
                .or_else(|| hit(BUFFERS).map(Constant::Buffer))
                .or_else(|| hit(ALU_TOKENS).map(|n| Constant::Op(OpClass::Alu, n)))
                .or_else(|| hit(ACT_TOKENS).map(|n| Constant::Op(OpClass::Act, n)))
        }
        ["nl", "tile_size", name] => TILE_SIZE.iter().find(|(n, _)| n == name).map(|&(_, v)| Constant::Int(v)),
        ["nisa", "nc_version", g] => NC_VERSIONS.iter().find(|(n, _)| n == g).map(|&(_, v)| Constant::Int(v)),
        ["nisa", e, m] => ENUMS
            .iter()
            .filter(|en| en.implemented)
            .find(|en| en.name == *e)
            .and_then(|en| en.members.iter().find(|(x, _)| x == m).map(|(x, _)| Constant::Enum(en.name, x))),
        ["std" | "core", rest @ ..] if matches!(rest.first(), Some(&"f32" | &"f64")) => float_constant(rest).map(Constant::Float),
        ["f32" | "f64", ..] => float_constant(&p).map(Constant::Float),
        _ => None,
    }
}

/// Rust's float constants a kernel may name (`f32::NEG_INFINITY`,
/// `std::f64::consts::PI`): trace-time floats (Python `float`), an `f32`
/// constant taking its `f32` value.
fn float_constant(path: &[&str]) -> Option<f64> {
    macro_rules! table {
        ($t:ident, $name:expr) => {
            match $name {
                ["INFINITY"] => Some($t::INFINITY as f64),
                ["NEG_INFINITY"] => Some($t::NEG_INFINITY as f64),
                ["MAX"] => Some($t::MAX as f64),
                ["MIN"] => Some($t::MIN as f64),
                ["MIN_POSITIVE"] => Some($t::MIN_POSITIVE as f64),
                ["EPSILON"] => Some($t::EPSILON as f64),
                ["consts", "PI"] => Some(std::$t::consts::PI as f64),
                ["consts", "TAU"] => Some(std::$t::consts::TAU as f64),
                ["consts", "E"] => Some(std::$t::consts::E as f64),
                ["consts", "FRAC_PI_2"] => Some(std::$t::consts::FRAC_PI_2 as f64),
                ["consts", "FRAC_1_SQRT_2"] => Some(std::$t::consts::FRAC_1_SQRT_2 as f64),
                ["consts", "SQRT_2"] => Some(std::$t::consts::SQRT_2 as f64),
                ["consts", "LN_2"] => Some(std::$t::consts::LN_2 as f64),
                ["consts", "LN_10"] => Some(std::$t::consts::LN_10 as f64),
                ["consts", "LOG2_E"] => Some(std::$t::consts::LOG2_E as f64),
                _ => None,
            }
        };
    }
    match path {
        ["f32", rest @ ..] => table!(f32, rest),
        ["f64", rest @ ..] => table!(f64, rest),
        _ => None,
    }
}

/// Every constant path (for suggestions).
pub fn constant_names() -> Vec<String> {
    let mut out: Vec<String> = implemented_dtypes()
        .chain(BUFFERS.iter().copied())
        .chain(ALU_TOKENS.iter().copied())
        .chain(ACT_TOKENS.iter().copied())
        .map(|n| format!("nl::{n}"))
        .collect();
    out.extend(TILE_SIZE.iter().map(|(n, _)| format!("nl::tile_size::{n}")));
    for e in ENUMS.iter().filter(|e| e.implemented) {
        out.extend(e.members.iter().map(|(m, _)| format!("nisa::{}::{m}", e.name)));
    }
    out
}
