//! Rules of `sequence_bounds`.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::check::value::Val;
use crate::diag::Diagnostics;

/// `sequence_bounds`: float32 or int32 tiles, `segment_ids` one partition of `n`
/// ids and `dst` of shape `[1, 2, n]`.
pub fn sequence_bounds(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    for role in ["dst", "segment_ids"] {
        if let Some((t, sp)) = site.tensor(role)
            && let Some(d) = t.dtype.filter(|d| !matches!(*d, "float32" | "int32"))
        {
            diag.error(sp, format!("{} of nisa.sequence_bounds is nl.{d}; it must be nl.float32 or nl.int32", site.label(role)));
        }
    }
    let Some((s, ss)) = site.tensor("segment_ids") else { return Ty::Unit };
    if let Some(p) = s.partitions().filter(|&p| p != 1) {
        diag.error(ss, format!("{} of nisa.sequence_bounds has {p} partitions; segment ids are one partition", site.label("segment_ids")));
    }
    if let (Some(n), Some((d, sd))) = (s.free_size(), site.tensor("dst"))
        && let Some(dims) = &d.shape
    {
        let known: Option<Vec<i64>> = dims.iter().map(Val::as_const).collect();
        if known.is_some_and(|k| k != [1, 2, n]) {
            diag.error(
                sd,
                format!(
                    "{} of nisa.sequence_bounds has shape {}; it must be [1, 2, {n}] (start and end per id)",
                    site.label("dst"),
                    d.shape_text()
                ),
            );
        }
    }
    Ty::Unit
}
