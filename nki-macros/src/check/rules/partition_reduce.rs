//! Rule of `tensor_partition_reduce`: a documented reduction token, a
//! one-partition `dst` as wide as `data`.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// The reductions the docs list for `tensor_partition_reduce`.
const REDUCTIONS: [&str; 5] = ["add", "average", "maximum", "bitwise_or", "bitwise_and"];

/// `tensor_partition_reduce`: `op` among the documented reductions; `dst` one
/// partition of `data`'s free size.
pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let Some(a) = site.arg("op")
        && let Ty::Op(_, Some(n)) = &a.ty
        && !REDUCTIONS.contains(n)
    {
        diag.error(
            a.expr.span,
            format!(
                "op=nl.{n} cannot reduce across partitions; {} takes nl.add, nl.average, nl.maximum, nl.bitwise_or or nl.bitwise_and",
                site.spec.py
            ),
        );
    }
    if let Some((d, ds)) = site.tensor("dst") {
        if let Some(p) = d.partitions()
            && p != 1
        {
            diag.error(ds, format!("{} of {} has {p} partitions; the reduction writes one partition", site.label("dst"), site.spec.py));
        }
        if let (Some(f), Some(g)) = (d.free_size(), site.tensor("data").and_then(|(x, _)| x.free_size()))
            && f != g
        {
            diag.error(
                ds,
                format!(
                    "{} of {} holds {f} elements per partition but {} holds {g}; they must match",
                    site.label("dst"),
                    site.spec.py,
                    site.label("data")
                ),
            );
        }
    }
    Ty::Unit
}
