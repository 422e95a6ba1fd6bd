//! Constants: dtypes, buffers, operator tokens, tile sizes and `nisa` enum
//! members, as the spec tables list them.

use super::OpClass;
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
        ["f32", "MIN"] => Some(Constant::Float(f32::MIN as f64)),
        ["f32", "MAX"] => Some(Constant::Float(f32::MAX as f64)),
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
