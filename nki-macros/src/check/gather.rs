//! Rules of the GpSimd Engine's per-partition index ops `nc_n_gather` and `nonzero_with_count`.

use super::CallSite;
use super::rules::same_geometry;
use super::types::Ty;
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

/// `nonzero_with_count`: `dst` one element per partition longer than `src`,
/// both with `src`'s partitions; `dst` int32, `src` float32 or int32.
pub fn nonzero_with_count(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let (Some((d, sd)), Some((s, ss))) = (site.tensor("dst"), site.tensor("src")) else { return Ty::Unit };
    if let (Some(fd), Some(fs)) = (d.free_size(), s.free_size())
        && fd != fs.saturating_add(1)
    {
        diag.error(
            sd,
            format!(
                "{} of nisa.nonzero_with_count holds {fd} elements per partition; it needs src's {fs} plus one for the count",
                site.label("dst")
            ),
        );
    }
    if let Some(t) = d.dtype.filter(|t| *t != "int32") {
        diag.error(sd, format!("{} of nisa.nonzero_with_count must be nl.int32, not nl.{t}", site.label("dst")));
    }
    if let Some(t) = s.dtype.filter(|t| !matches!(*t, "float32" | "int32")) {
        diag.error(ss, format!("{} of nisa.nonzero_with_count must be nl.float32 or nl.int32, not nl.{t}", site.label("src")));
    }
    Ty::Unit
}
