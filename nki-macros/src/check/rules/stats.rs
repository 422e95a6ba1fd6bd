//! Rules of the batch-norm statistics instructions `bn_stats` and `bn_aggr`.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;
use nki_spec::constants::{BN_AGGR_DIM, BN_STATS_DIM, BN_STATS_FMAX};

/// Reports a known partition-count mismatch between `dst` and `data`.
fn same_partitions(diag: &mut Diagnostics, site: &CallSite<'_>) {
    if let (Some((d, ds)), Some((x, _))) = (site.tensor("dst"), site.tensor("data"))
        && let (Some(pd), Some(px)) = (d.partitions(), x.partitions())
        && pd != px
    {
        diag.error(
            ds,
            format!("{} of {} has {pd} partitions but {} has {px}; they must match", site.label("dst"), site.spec.py, site.label("data")),
        );
    }
}

/// Reports a `dst` whose known free size is not `want`.
fn dst_free(diag: &mut Diagnostics, site: &CallSite<'_>, want: i64, what: &str) {
    if let Some((d, ds)) = site.tensor("dst")
        && let Some(f) = d.free_size()
        && f != want
    {
        diag.error(
            ds,
            format!("{} of {} holds {f} elements per partition, but the op writes {want} ({what})", site.label("dst"), site.spec.py),
        );
    }
}

/// `bn_stats`: at most `bn_stats_fmax` input elements per partition, six outputs per partition.
pub fn bn_stats(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_partitions(diag, site);
    if let Some((x, xs)) = site.tensor("data")
        && let Some(f) = x.free_size()
        && f > BN_STATS_FMAX
    {
        diag.error(
            xs,
            format!(
                "{} of nisa.bn_stats holds {f} elements per partition, more than nl.tile_size.bn_stats_fmax = {BN_STATS_FMAX}; call bn_stats per {BN_STATS_FMAX}-element chunk and combine the results with one nisa.bn_aggr",
                site.label("data")
            ),
        );
    }
    dst_free(diag, site, BN_STATS_DIM, "count, mean and variance*count of the even, then of the odd elements");
    Ty::Unit
}

/// `bn_aggr`: its input is whole (count, mean, variance*count) triples, its output a mean and a variance.
pub fn bn_aggr(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_partitions(diag, site);
    if let Some((x, xs)) = site.tensor("data")
        && let Some(f) = x.free_size()
        && (f == 0 || f % 3 != 0)
    {
        diag.error(
            xs,
            format!("{} of nisa.bn_aggr holds {f} elements per partition; it must hold whole (count, mean, variance*count) triples from nisa.bn_stats", site.label("data")),
        );
    }
    dst_free(diag, site, BN_AGGR_DIM, "a mean and a variance");
    Ty::Unit
}
