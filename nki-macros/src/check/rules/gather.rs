//! Rules of the GpSimd Engine's per-partition gathers `nc_n_gather` and `local_gather`.

use crate::check::operands::same_geometry;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `nc_n_gather`: uint32 indices shaping `dst`, `dst` in `data`'s dtype, one partition count.
pub fn nc_n_gather(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "indices", "dst");
    if let (Some((x, _)), Some((i, si))) = (site.tensor("data"), site.tensor("indices"))
        && let (Some(a), Some(b)) = (x.partitions(), i.partitions())
        && a != b
    {
        diag.error(si, format!("{} of nisa.nc_n_gather has {b} partitions but data has {a}; they must match", site.label("indices")));
    }
    if let Some((i, si)) = site.tensor("indices")
        && let Some(t) = i.dtype.filter(|t| *t != "uint32")
    {
        diag.error(si, format!("{} of nisa.nc_n_gather must be nl.uint32, not nl.{t}", site.label("indices")));
    }
    if let (Some((d, sd)), Some((x, _))) = (site.tensor("dst"), site.tensor("data"))
        && let (Some(a), Some(b)) = (d.dtype, x.dtype)
        && a != b
    {
        diag.error(sd, format!("{} of nisa.nc_n_gather is nl.{a} but data is nl.{b}; they must match", site.label("dst")));
    }
    Ty::Unit
}

/// `local_gather`: uint16 index, `dst` in `src_buffer`'s dtype, `num_elem_per_idx`
/// a power of two up to 32, and `dst` as wide as the indices it gathers.
pub fn local_gather(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let Some((i, si)) = site.tensor("index")
        && let Some(t) = i.dtype.filter(|t| *t != "uint16")
    {
        diag.error(si, format!("{} of nisa.local_gather must be nl.uint16, not nl.{t}", site.label("index")));
    }
    if let (Some((d, sd)), Some((x, _))) = (site.tensor("dst"), site.tensor("src_buffer"))
        && let (Some(a), Some(b)) = (d.dtype, x.dtype)
        && a != b
    {
        diag.error(sd, format!("{} of nisa.local_gather is nl.{a} but src_buffer is nl.{b}; they must match", site.label("dst")));
    }
    let int = |name: &str| site.arg(name).and_then(|a| a.ty.const_int());
    let per = int("num_elem_per_idx");
    if let (Some(n), Some(a)) = (per, site.arg("num_elem_per_idx"))
        && ![1, 2, 4, 8, 16, 32].contains(&n)
    {
        diag.error(a.expr.span, format!("num_elem_per_idx of nisa.local_gather is {n}; it must be 1, 2, 4, 8, 16 or 32"));
    }
    if let (Some((d, sd)), Some((i, _))) = (site.tensor("dst"), site.tensor("index"))
        && let (Some(fd), Some(fi)) = (d.free_size(), i.free_size())
    {
        let valid = int("num_valid_indices").unwrap_or(fi.saturating_mul(16));
        let want = valid.saturating_mul(per.unwrap_or(1));
        if fd != want {
            diag.error(
                sd,
                format!(
                    "{} of nisa.local_gather holds {fd} elements per partition; it gathers {valid} indices x {} elements = {want}",
                    site.label("dst"),
                    per.unwrap_or(1)
                ),
            );
        }
    }
    Ty::Unit
}
