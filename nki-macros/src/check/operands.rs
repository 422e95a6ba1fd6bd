//! Operand checks shared by the static rules of several op families: element
//! sizes, shape arguments, and the rules that only compare two tiles' geometry.

use super::site::{ArgInfo, CallSite};
use super::types::{TensorTy, Ty, dims_text, known_product};
use super::value::Val;
use crate::ast::{Space, Spn};
use crate::diag::Diagnostics;

/// Bytes per element of an `nl` dtype.
pub(super) fn dtype_bytes(name: &str) -> i64 {
    match name {
        "float32" | "tfloat32" | "int32" | "uint32" | "float8_e5m2_x4" | "float8_e4m3fn_x4" => 4,
        "bfloat16" | "float16" | "int16" | "uint16" | "float4_e2m1fn_x4" => 2,
        _ => 1,
    }
}

/// Reports a shape whose element count does not fit an i64.
pub(super) fn countable(diag: &mut Diagnostics, dims: &[Val], span: Spn) {
    if let Some(Err(_)) = known_product(dims) {
        diag.error(span, format!("integer overflow: a tensor of shape {} has more elements than fit in an i64", dims_text(dims)));
    }
}

/// The static shape of a shape argument (`(a, b)`, `[a, b]`, or `t.shape()`).
pub(super) fn shape_of(arg: &ArgInfo<'_>) -> Option<Vec<Val>> {
    match &arg.ty {
        Ty::Tuple(items) | Ty::List(items) => {
            Some(items.iter().map(|t| if let Ty::Int(v) = t { v.clone() } else { Val::unknown() }).collect())
        }
        Ty::Shape(dims) => dims.clone(),
        _ => None,
    }
}

pub(super) fn geometry(t: &TensorTy) -> (Option<i64>, Option<i64>) {
    (t.partitions(), t.free_size())
}

/// Reports when two tiles' partition counts or free sizes are known to differ.
pub(super) fn same_geometry(diag: &mut Diagnostics, site: &CallSite<'_>, a: &str, b: &str) {
    let (Some((ta, _)), Some((tb, sb))) = (site.tensor(a), site.tensor(b)) else {
        return;
    };
    let ((pa, fa), (pb, fb)) = (geometry(ta), geometry(tb));
    let mismatch = matches!((pa, pb), (Some(x), Some(y)) if x != y) || matches!((fa, fb), (Some(x), Some(y)) if x != y);
    if mismatch {
        diag.error(
            sb,
            format!(
                "{} of {} has shape {} ({} partitions x {} elements) but {} has shape {} ({} x {}); the op needs equal partition counts and elements per partition",
                site.label(b),
                site.spec.py,
                tb.shape_text(),
                pb.map_or("?".into(), |v| v.to_string()),
                fb.map_or("?".into(), |v| v.to_string()),
                site.label(a),
                ta.shape_text(),
                pa.map_or("?".into(), |v| v.to_string()),
                fa.map_or("?".into(), |v| v.to_string()),
            ),
        );
    }
}

/// Equal geometry of the inputs `a`, `b` and `dst`; at most one input in PSUM.
pub(super) fn two_inputs(diag: &mut Diagnostics, site: &CallSite<'_>, a: &str, b: &str) -> Ty {
    same_geometry(diag, site, a, b);
    same_geometry(diag, site, a, "dst");
    if let (Some((ta, _)), Some((tb, sb))) = (site.tensor(a), site.tensor(b))
        && ta.space == Some(Space::Psum)
        && tb.space == Some(Space::Psum)
    {
        diag.error(
            sb,
            format!("{a} and {b} of {} are both in PSUM; at most one input may be in PSUM (copy one to SBUF first)", site.spec.py),
        );
    }
    Ty::Unit
}

/// `dst` and `data` of an element-wise op have the same geometry.
pub fn same_tile_dst_data(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "data");
    Ty::Unit
}

/// `dst` and `src` of a copy have the same geometry.
pub fn same_tile_dst_src(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "src");
    Ty::Unit
}

/// Reports when `dst` and `src` are known to hold different element counts.
pub(super) fn same_count(diag: &mut Diagnostics, site: &CallSite<'_>, src: &str) -> Ty {
    let (Some((d, _)), Some((s, ss))) = (site.tensor("dst"), site.tensor(src)) else {
        return Ty::Unit;
    };
    let count = |t: &TensorTy| known_product(t.shape.as_ref()?)?.ok();
    if let (Some(a), Some(b)) = (count(d), count(s))
        && a != b
    {
        diag.error(
            ss,
            format!(
                "{} moves {b} elements from {} into {a} elements of {}; the counts must match",
                site.spec.py,
                site.label(src),
                site.label("dst")
            ),
        );
    }
    Ty::Unit
}
