//! Rules of the Tensor Engine's `nc_matmul` and `nc_transpose`.

use crate::ast::ExprKind;
use crate::check::operands::geometry;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `nc_matmul`: operands contract over equal partition counts, stationary free ≤
/// 128, moving free ≤ the generation's moving limit, dst shaped (M, N).
pub fn nc_matmul(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let reported = diag.count();
    let st = site.tensor("stationary");
    let mv = site.tensor("moving");
    if let (Some((s, _)), Some((m, ms))) = (st, mv)
        && let (Some(ks), Some(km)) = (s.partitions(), m.partitions())
        && ks != km
    {
        diag.error(
            ms,
            format!(
                "matmul operands contract over their partition dim: stationary {} has {ks} partitions {} but moving {} has {km} {}",
                site.label("stationary"),
                s.shape_text(),
                site.label("moving"),
                m.shape_text()
            ),
        );
    }
    if let Some((s, ss)) = st
        && let Some(f) = s.free_size()
        && f > site.hw.gemm_stationary_fmax as i64
    {
        diag.error(
            ss,
            format!(
                "stationary {} has free size {f} > gemm_stationary_fmax = {}: the stationary operand covers at most 128 columns",
                site.label("stationary"),
                site.hw.gemm_stationary_fmax
            ),
        );
    }
    if let Some((m, ms)) = mv
        && let Some(f) = m.free_size()
        && f > site.hw.gemm_moving_fmax as i64
    {
        diag.error(
            ms,
            format!(
                "moving {} has free size {f} > gemm_moving_fmax = {} on {}: one matmul writes at most one PSUM bank of {} fp32 per partition",
                site.label("moving"),
                site.hw.gemm_moving_fmax,
                site.target,
                site.hw.gemm_moving_fmax
            ),
        );
    }
    // A dst mismatch that only follows from an operand already reported is not repeated.
    if diag.count() > reported {
        return Ty::Unit;
    }
    if let (Some((d, ds)), Some((s, _)), Some((m, _))) = (site.tensor("dst"), st, mv)
        && let Some(dims) = &d.shape
    {
        let (dp, df) = (d.partitions(), d.free_size());
        let transpose = matches!(site.arg("is_transpose").map(|a| &a.expr.kind), Some(ExprKind::Bool(true)));
        let want_f = if transpose { s.partitions() } else { m.free_size() };
        let bad = matches!((dp, s.free_size()), (Some(a), Some(b)) if a != b) || matches!((df, want_f), (Some(a), Some(b)) if a != b);
        if bad && !dims.is_empty() {
            diag.error(
                ds,
                format!(
                    "dst {} has shape {} but stationaryᵀ·moving is [{}, {}] (stationary free size x moving free size)",
                    site.label("dst"),
                    d.shape_text(),
                    s.free_size().map_or("?".into(), |v| v.to_string()),
                    want_f.map_or("?".into(), |v| v.to_string())
                ),
            );
        }
    }
    Ty::Unit
}

/// `nc_transpose`: dst is data's partitions and free elements swapped.
pub fn nc_transpose(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let (Some((d, ds)), Some((x, _))) = (site.tensor("dst"), site.tensor("data")) else {
        return Ty::Unit;
    };
    let ((dp, df), (xp, xf)) = (geometry(d), geometry(x));
    if matches!((dp, xf), (Some(a), Some(b)) if a != b) || matches!((df, xp), (Some(a), Some(b)) if a != b) {
        diag.error(
            ds,
            format!(
                "nc_transpose of {} {} needs a dst with its partitions and free elements swapped, but dst is {}",
                site.label("data"),
                x.shape_text(),
                d.shape_text()
            ),
        );
    }
    Ty::Unit
}
