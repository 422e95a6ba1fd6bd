//! Batch-norm statistics on the Vector Engine: `bn_stats` and `bn_aggr`.
//!
//! `bn_stats` summarises each partition row of a tile as two groups, the even
//! and the odd elements, each as `(count, mean, variance * count)`; `bn_aggr`
//! merges any number of such triples (from one or many `bn_stats` calls laid
//! side by side) into the row's mean and (population) variance. Both compute in
//! fp32 and round only when writing `dst`.

use super::alu::reduce;
use super::elementwise::NameOpts;
use super::exec::{Input, rowwise};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{NkiError, Result, Tensor};
use nki_spec::constants::{BN_AGGR_DIM, BN_STATS_DIM, BN_STATS_FMAX};

/// `(count, mean, sum of squared deviations)` of `vals`, in fp32: the mean
/// first, then the deviations from it (two passes, as stable as Welford's).
fn moments(vals: impl Iterator<Item = f32> + Clone) -> [f32; 3] {
    let xs: Vec<f32> = vals.collect();
    if xs.is_empty() {
        // An empty group contributes nothing to bn_aggr: count 0, mean 0, m2 0.
        return [0.0, 0.0, 0.0];
    }
    // Sums in the Vector Engine's reduction order (`reduce`), as every row sum.
    let mean = reduce(NlOp::Add, &xs, 0.0) / xs.len() as f32;
    let squares: Vec<f32> = xs.iter().map(|v| (v - mean) * (v - mean)).collect();
    [xs.len() as f32, mean, reduce(NlOp::Add, &squares, 0.0)]
}

/// Starts `op` reading `data` into `dst`; both as tiles `(data, dst)`.
fn begin(ctx: &Ctx, op: &'static str, dst: &Tensor, data: &Tensor) -> Result<(TileView, TileView)> {
    ctx.begin_op(op)?;
    ctx.defer_unwritten(op);
    ctx.record_spec(op, &[Some(data)], &[Some(dst)])?;
    Ok((TileView::of(op, "data", data)?, TileView::of(op, "dst", dst)?))
}

/// Refusal of `data`'s row length: how many elements a partition holds, then `rule`.
fn row_length(data: &Tensor, x: &TileView, rule: &str) -> String {
    format!("data {} holds {} elements per partition{rule}", data.describe(), x.nf)
}

fn check_rows(op: &'static str, dst: &Tensor, d: &TileView, data: &Tensor, x: &TileView, want: usize) -> Result<()> {
    if d.np != x.np || d.nf != want {
        return Err(NkiError::shape(
            op,
            format!(
                "dst {} must be {} partitions x {want} elements (data {} has {} partitions), it is {} x {}",
                dst.describe(),
                x.np,
                data.describe(),
                x.np,
                d.np,
                d.nf
            ),
        ));
    }
    Ok(())
}

/// `nisa.bn_stats(dst, data)`: for each partition, `(count, mean, variance * count)`
/// of the even elements of `data`'s row, then of its odd elements (six values).
/// A row holds at most `nl.tile_size.bn_stats_fmax` (512) elements.
pub fn bn_stats(ctx: &Ctx, dst: &Tensor, data: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.bn_stats";
    let _ = opts;
    let (x, d) = begin(ctx, OP, dst, data)?;
    if x.nf as i64 > BN_STATS_FMAX {
        let rule =
            format!(", more than nl.tile_size.bn_stats_fmax = {BN_STATS_FMAX}; split it and combine the statistics with nisa.bn_aggr");
        return Err(NkiError::constraint(OP, row_length(data, &x, &rule)));
    }
    check_rows(OP, dst, &d, data, &x, BN_STATS_DIM as usize)?;
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |_, rows, out| {
        let row = rows[0];
        let even = moments(row.iter().step_by(2).copied());
        let odd = moments(row.iter().skip(1).step_by(2).copied());
        out[..3].copy_from_slice(&even);
        out[3..].copy_from_slice(&odd);
    })
}

/// `nisa.bn_aggr(dst, data)`: merges each partition's `(count, mean, variance * count)`
/// triples into its mean and variance (two values). The variance is the
/// population variance of all the elements the triples summarise; a row whose
/// counts are all 0 has no mean (NaN).
pub fn bn_aggr(ctx: &Ctx, dst: &Tensor, data: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.bn_aggr";
    let _ = opts;
    let (x, d) = begin(ctx, OP, dst, data)?;
    if x.nf == 0 || x.nf % 3 != 0 {
        return Err(NkiError::shape(
            OP,
            row_length(data, &x, "; it must hold whole (count, mean, variance*count) triples from nisa.bn_stats"),
        ));
    }
    check_rows(OP, dst, &d, data, &x, BN_AGGR_DIM as usize)?;
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |_, rows, out| {
        let triples = rows[0].chunks_exact(3);
        let sum = |f: &dyn Fn(&[f32]) -> f32| reduce(NlOp::Add, &triples.clone().map(f).collect::<Vec<f32>>(), 0.0);
        let n = sum(&|t| t[0]);
        let mean = sum(&|t| t[0] * t[1]) / n;
        // Chan et al.: the groups' own spread plus the spread of their means.
        let m2 = sum(&|t| t[2] + t[0] * ((t[1] - mean) * (t[1] - mean)));
        out[0] = mean;
        out[1] = m2 / n;
    })
}
