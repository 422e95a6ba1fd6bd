//! Rule of `topk`: bf16 snake in, bf16 values and uint32 indices out, the
//! documented ranges of `n` and K.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;
use nki_spec::constants::{TOPK_K_RANGE, TOPK_N_RANGE, TOPK_SNAKE};

/// Reports a tile `role` of a known dtype other than `want`.
fn dtype(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str, want: &str) {
    if let Some((t, sp)) = site.tensor(role)
        && let Some(d) = t.dtype
        && d != want
    {
        diag.error(sp, format!("{} of {} must be nl.{want}, not nl.{d}", site.label(role), site.spec.py));
    }
}

/// `topk`: dtypes, partitions a multiple of 16 shared by the three tiles,
/// `(P, K)` outputs, `n` and K in range, `src` wide enough for `n`.
pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    dtype(diag, site, "src", "bfloat16");
    dtype(diag, site, "val_dst", "bfloat16");
    dtype(diag, site, "idx_dst", "uint32");
    let src = site.tensor("src").map(|(t, sp)| (t.partitions(), t.free_size(), sp));
    if let Some((Some(p), _, sp)) = src
        && p % TOPK_SNAKE != 0
    {
        diag.error(
            sp,
            format!(
                "{} of {} has {p} partitions; it must be a multiple of {TOPK_SNAKE} (the snake layout)",
                site.label("src"),
                site.spec.py
            ),
        );
    }
    for role in ["val_dst", "idx_dst"] {
        if let (Some((t, sp)), Some((Some(p), _, _))) = (site.tensor(role), src)
            && let Some(q) = t.partitions()
            && q != p
        {
            diag.error(sp, format!("{} of {} has {q} partitions but src has {p}; they must match", site.label(role), site.spec.py));
        }
    }
    let k = site.tensor("val_dst").and_then(|(t, _)| t.free_size());
    if let (Some(k), Some((t, sp))) = (k, site.tensor("idx_dst"))
        && let Some(f) = t.free_size()
        && f != k
    {
        diag.error(
            sp,
            format!(
                "{} of {} holds {f} elements per partition but val_dst holds K = {k}; they must match",
                site.label("idx_dst"),
                site.spec.py
            ),
        );
    }
    let n = site.arg("n").and_then(|a| a.ty.const_int().map(|v| (v, a.expr.span)));
    let ((nlo, nhi), (klo, khi)) = (TOPK_N_RANGE, TOPK_K_RANGE);
    if let Some((n, sp)) = n
        && !(nlo..=nhi).contains(&n)
    {
        diag.error(sp, format!("n = {n} is outside {nlo}..={nhi}, the snake sizes {} handles", site.spec.py));
    }
    if let (Some(k), Some((_, sp))) = (k, site.tensor("val_dst")) {
        let most = n.map_or(khi, |(n, _)| khi.min(n));
        if !(klo..=most).contains(&k) {
            diag.error(
                sp,
                format!(
                    "{} of {} holds K = {k} elements per partition; K must be in {klo}..={most} (at most n)",
                    site.label("val_dst"),
                    site.spec.py
                ),
            );
        }
    }
    if let (Some((n, sp)), Some((_, Some(f), _))) = (n, src)
        && f.checked_mul(TOPK_SNAKE).is_some_and(|cells| cells < n)
    {
        diag.error(
            sp,
            format!(
                "n = {n} needs src to hold at least {} columns of the snake, it holds {f}",
                n / TOPK_SNAKE + i64::from(n % TOPK_SNAKE != 0)
            ),
        );
    }
    Ty::Unit
}
