//! Rules of the random-number instructions (`rng`, `rand2`, `dropout`, the seed
//! and state instructions) and of their `nl` twins `nl.dropout`, `nl.random_seed`.

use crate::ast::{Expr, ExprKind, Space, UnOp};
use crate::check::operands::same_geometry;
use crate::check::site::{ArgInfo, CallSite};
use crate::check::types::{TensorTy, Ty};
use crate::diag::Diagnostics;
use nki_spec::hw::Generation;

/// XORWOW words per generator; a GpSimd lane holds one generator, a Vector lane four.
const XORWOW_WORDS: i64 = 6;

/// The `nisa.engine` member an argument names (`nisa::engine::gpsimd`).
fn member(arg: &ArgInfo<'_>) -> Option<String> {
    match &arg.expr.kind {
        ExprKind::Path(p) => p.last().cloned(),
        _ => None,
    }
}

/// The engine a call picks: `default` when `engine=` is absent or `unknown`,
/// else its member, reported when outside `allowed` (each member with the first
/// generation where the op has it) or not on the target yet; `None` when the
/// argument is not a literal member.
fn allowed_engine(diag: &mut Diagnostics, site: &CallSite<'_>, default: &str, allowed: &[(&str, Generation)]) -> Option<String> {
    let Some(a) = site.arg("engine") else { return Some(default.to_string()) };
    let e = member(a)?;
    if e == "unknown" {
        return Some(default.to_string());
    }
    match allowed.iter().find(|(m, _)| *m == e) {
        None => {
            let names: Vec<String> = allowed.iter().map(|(m, _)| format!("nisa.engine.{m}")).collect();
            diag.error(a.expr.span, format!("{} has no random generator on nisa.engine.{e}; use {}", site.spec.py, names.join(" or ")));
        }
        Some((_, first)) if site.target.nc_version() < first.nc_version() => {
            diag.error(
                a.expr.span,
                format!("{} on nisa.engine.{e} needs {first} or newer; the kernel targets {}", site.spec.py, site.target),
            );
        }
        Some(_) => {}
    }
    Some(e)
}

/// Reports a GpSimd instruction on a PSUM tensor `role`.
fn gpsimd_not_psum(diag: &mut Diagnostics, site: &CallSite<'_>, engine: Option<&str>, role: &str) {
    if engine == Some("gpsimd")
        && let Some((t, sp)) = site.tensor(role)
        && t.space == Some(Space::Psum)
    {
        diag.error(sp, format!("{} of {} is in PSUM, which the GpSimd Engine cannot access; use SBUF", site.label(role), site.spec.py));
    }
}

/// `rng`: an integer `dst`; the GpSimd engine from trn2 on, never on PSUM.
pub fn rng(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let e = allowed_engine(diag, site, "vector", &[("vector", Generation::Trn1), ("gpsimd", Generation::Trn2)]);
    if let Some((t, sp)) = site.tensor("dst")
        && let Some(d) = t.dtype.filter(|d| d.starts_with("float") || d.starts_with("bfloat") || *d == "tfloat32")
    {
        diag.error(
            sp,
            format!("{} of nisa.rng is nl.{d}; it receives random bits: use an integer dtype (int8 .. uint32)", site.label("dst")),
        );
    }
    gpsimd_not_psum(diag, site, e.as_deref(), "dst");
    Ty::Unit
}

/// A number literal argument (`0.5`, `-1`, `2`).
fn number(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Float(v) => Some(*v),
        ExprKind::Int(v) => Some(*v as f64),
        ExprKind::Unary(UnOp::Neg, x) => number(x).map(|v| -v),
        _ => None,
    }
}

/// `rand2`: literal bounds with `min < max`.
pub fn rand2(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let (Some(lo), Some(hi)) = (site.arg("min"), site.arg("max"))
        && let (Some(a), Some(b)) = (number(lo.expr), number(hi.expr))
        && a >= b
    {
        diag.error(lo.expr.span, format!("min of nisa.rand2 is {a} but max is {b}; the range needs min < max"));
    }
    Ty::Unit
}

/// `dropout`: `dst` like `data` (geometry and dtype), a literal `prob` in [0, 1],
/// float32 probabilities for integer data.
pub fn dropout(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "data", "dst");
    if let (Some((d, sd)), Some((x, _))) = (site.tensor("dst"), site.tensor("data"))
        && let (Some(a), Some(b)) = (d.dtype, x.dtype)
        && a != b
    {
        diag.error(sd, format!("{} of nisa.dropout is nl.{a} but data is nl.{b}; they must match", site.label("dst")));
    }
    if let (Some((x, _)), Some((p, sp))) = (site.tensor("data"), site.tensor("prob"))
        && let (Some(a), Some(b)) = (x.dtype, p.dtype)
        && a.contains("int")
        && b != "float32"
    {
        diag.error(
            sp,
            format!("{} of nisa.dropout is nl.{b}; with integer data (nl.{a}) the probabilities must be nl.float32", site.label("prob")),
        );
    }
    if let Some(p) = site.arg("prob")
        && let Some(v) = number(p.expr).filter(|v| !(0.0..=1.0).contains(v))
    {
        diag.error(p.expr.span, format!("prob of nisa.dropout is {v}; a drop probability lies in [0, 1]"));
    }
    Ty::Unit
}

/// `set_rng_seed` / `nl.random_seed`: a `[1, 1]` tensor of a 32-bit dtype.
pub fn set_rng_seed(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let role = site.spec.params.first().map_or("src_seeds", |p| p.name);
    if let Some((t, sp)) = site.tensor(role) {
        let one = matches!((t.partitions(), t.free_size()), (Some(p), Some(f)) if p != 1 || f != 1);
        let wide = t.dtype.is_some_and(|d| crate::check::operands::dtype_bytes(d) != 4);
        if one || wide {
            diag.error(
                sp,
                format!(
                    "{} of {} must be a [1, 1] tensor of a 32-bit dtype (the seed), it is {}",
                    site.label(role),
                    site.spec.py,
                    describe(t)
                ),
            );
        }
    }
    Ty::Unit
}

/// `nl.dropout`: a literal `rate` in [0, 1]; the result is a new SBUF tile of
/// `x`'s shape in `dtype` (default `x`'s).
pub fn nl_dropout(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let Some(r) = site.arg("rate")
        && let Some(v) = number(r.expr).filter(|v| !(0.0..=1.0).contains(v))
    {
        diag.error(r.expr.span, format!("rate of nl.dropout is {v}; a drop probability lies in [0, 1]"));
    }
    let x = site.tensor("x").map(|(t, _)| t.clone()).unwrap_or_default();
    let dtype = match site.arg("dtype").map(|a| &a.ty) {
        Some(Ty::Dtype(d)) => *d,
        _ => x.dtype,
    };
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape: x.shape, dtype })
}

fn describe(t: &TensorTy) -> String {
    format!("{} of nl.{}", t.shape_text(), t.dtype.unwrap_or("?"))
}

/// `rand_get_state` / `rand_set_state`: the GpSimd engine (default) from trn2 on,
/// the Vector engine on trn3; a uint32 tile of one lane state (6 or 24 words)
/// per partition, never in PSUM for the GpSimd engine.
pub fn rand_state(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let e = allowed_engine(diag, site, "gpsimd", &[("gpsimd", Generation::Trn2), ("vector", Generation::Trn3)]);
    let role = site.spec.params.first().map_or("dst", |p| p.name);
    gpsimd_not_psum(diag, site, e.as_deref(), role);
    let Some((t, sp)) = site.tensor(role) else { return Ty::Unit };
    if let Some(d) = t.dtype.filter(|d| *d != "uint32") {
        diag.error(sp, format!("{} of {} is nl.{d}; generator states are nl.uint32", site.label(role), site.spec.py));
    }
    if let (Some(e), Some(f)) = (e, t.free_size()) {
        let want = XORWOW_WORDS * if e == "vector" { 4 } else { 1 };
        if f != want {
            diag.error(
                sp,
                format!(
                    "{} of {} holds {f} elements per partition; a nisa.engine.{e} lane's XORWOW state is {want} words",
                    site.label(role),
                    site.spec.py
                ),
            );
        }
    }
    Ty::Unit
}
