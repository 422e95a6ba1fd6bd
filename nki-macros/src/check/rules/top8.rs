//! Rules of the top-8 instructions `max8`, `nc_find_index8` and `nc_match_replace8`.

use crate::check::operands::same_tile_dst_data;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;
use nki_spec::constants::{TOP8_DATA_RANGE, TOP8_K};

/// Reports a searched tile whose known free size is outside what the instructions handle.
fn searched(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str) {
    let (lo, hi) = TOP8_DATA_RANGE;
    if let Some((t, sp)) = site.tensor(role)
        && let Some(f) = t.free_size()
        && !(lo..=hi).contains(&f)
    {
        diag.error(
            sp,
            format!("{} of {} holds {f} elements per partition; the instruction searches {lo} to {hi}", site.label(role), site.spec.py),
        );
    }
}

/// Reports a tile `role` whose known free size is not 8, or whose partitions differ from `data`'s.
fn eight(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str, data: &str) {
    let Some((t, sp)) = site.tensor(role) else { return };
    if let Some(f) = t.free_size()
        && f != TOP8_K
    {
        diag.error(sp, format!("{} of {} holds {f} elements per partition; it must hold {TOP8_K}", site.label(role), site.spec.py));
    }
    if let (Some(p), Some(q)) = (t.partitions(), site.tensor(data).and_then(|(d, _)| d.partitions()))
        && p != q
    {
        diag.error(
            sp,
            format!("{} of {} has {p} partitions but {} has {q}; they must match", site.label(role), site.spec.py, site.label(data)),
        );
    }
}

/// Reports an index tile of a known dtype other than uint32 / uint16.
fn indices(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str) {
    if let Some((t, sp)) = site.tensor(role)
        && let Some(d) = t.dtype
        && !matches!(d, "uint32" | "uint16")
    {
        diag.error(sp, format!("{} of {} receives indices: it must be nl.uint32 or nl.uint16, not nl.{d}", site.label(role), site.spec.py));
    }
}

/// `max8`: 8 to 16384 searched elements, 8 results per partition.
pub fn max8(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    searched(diag, site, "src");
    eight(diag, site, "dst", "src");
    Ty::Unit
}

/// The searches for 8 `vals` in `data` that write their positions to `idx`:
/// searched as by `max8`, 8 values and 8 uint indices per partition.
fn find_eight(diag: &mut Diagnostics, site: &CallSite<'_>, idx: &str) {
    searched(diag, site, "data");
    eight(diag, site, "vals", "data");
    eight(diag, site, idx, "data");
    indices(diag, site, idx);
}

/// `nc_find_index8`: the indices of 8 values, in `dst`.
pub fn find_index8(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    find_eight(diag, site, "dst");
    Ty::Unit
}

/// `nc_match_replace8`: `dst` shaped like `data`, the optional indices in `dst_idx`.
pub fn match_replace8(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    find_eight(diag, site, "dst_idx");
    same_tile_dst_data(diag, site)
}
