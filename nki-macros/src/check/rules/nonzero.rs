//! Rules of `nonzero_with_count`.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

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
