//! `topk`: the K largest of `n` bf16 values laid out as a 16-partition snake
//! (GpSimd Engine).
//!
//! Each group of 16 partitions holds one snake: element `e` sits at partition
//! `e % 16`, column `e / 16`. Every partition of the group receives the group's
//! K largest values in ascending order and their snake positions. Where the
//! docs are silent the emulator follows the NumPy executor: NaN ranks above
//! +inf when choosing, and among equal values the lower position comes first.

use super::elementwise::NameOpts;
use super::exec::{read_tile, write_tile};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};
use nki_spec::constants::{TOPK_K_RANGE, TOPK_N_RANGE, TOPK_SNAKE};
use std::cmp::Ordering;

const SNAKE: usize = TOPK_SNAKE as usize;

/// Checks that `t` is an SBUF tile of `dtype`.
fn sbuf_of(op: &'static str, role: &str, t: &Tensor, dtype: Dtype) -> Result<TileView> {
    if t.buffer() != Buffer::Sbuf || t.dtype() != dtype {
        return Err(NkiError::constraint(op, format!("{role} {} must be a {dtype} SBUF tile", t.describe())));
    }
    TileView::of(op, role, t)
}

/// How `a` ranks against `b`: NaN above every number, -0 equal to +0.
fn rank(a: f32, b: f32) -> Ordering {
    a.is_nan().cmp(&b.is_nan()).then_with(|| a.partial_cmp(&b).unwrap_or(Ordering::Equal))
}

/// `nisa.topk(val_dst, idx_dst, src, n)`: see the module docs. `src` and
/// `val_dst` are bf16, `idx_dst` uint32, all in SBUF; K is `val_dst`'s free size.
pub fn topk(ctx: &Ctx, val_dst: &Tensor, idx_dst: &Tensor, src: &Tensor, n: i64, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.topk";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(src)], &[Some(val_dst), Some(idx_dst)])?;
    let s = sbuf_of(OP, "src", src, Dtype::Bf16)?;
    let v = sbuf_of(OP, "val_dst", val_dst, Dtype::Bf16)?;
    let i = sbuf_of(OP, "idx_dst", idx_dst, Dtype::U32)?;
    let k = v.nf;
    if !s.np.is_multiple_of(SNAKE) || v.np != s.np || i.np != s.np || i.nf != k {
        return Err(NkiError::shape(
            OP,
            format!(
                "src, val_dst and idx_dst must share a partition count that is a multiple of {SNAKE}, and val_dst and idx_dst must both be (P, K); got src {} x {}, val_dst {} x {k}, idx_dst {} x {}",
                s.np, s.nf, v.np, i.np, i.nf
            ),
        ));
    }
    let ((nlo, nhi), (klo, khi)) = (TOPK_N_RANGE, TOPK_K_RANGE);
    if n < nlo || n > nhi {
        return Err(NkiError::constraint(OP, format!("n = {n} must be in {nlo}..={nhi}")));
    }
    if (k as i64) < klo || k as i64 > khi.min(n) {
        return Err(NkiError::constraint(OP, format!("K = {k} (val_dst's free size) must be in {klo}..={} (at most n = {n})", khi.min(n))));
    }
    let n = n as usize;
    if s.nf * SNAKE < n {
        return Err(NkiError::shape(
            OP,
            format!("src {} holds {} columns; n = {n} needs at least {}", src.describe(), s.nf, n.div_ceil(SNAKE)),
        ));
    }
    ctx.validated()?;
    let x = read_tile(src, &s);
    let (mut vals, mut idxs) = (Vec::with_capacity(s.np * k), Vec::with_capacity(s.np * k));
    for group in x.chunks(SNAKE * s.nf) {
        let snake: Vec<f32> = (0..n).map(|e| group[(e % SNAKE) * s.nf + e / SNAKE]).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| rank(snake[b], snake[a]).then(a.cmp(&b)));
        order.truncate(k);
        // Ascending; NaN and +inf both count as the largest value here, ties by position.
        let key = |e: usize| if snake[e].is_nan() { f32::INFINITY } else { snake[e] };
        order.sort_by(|&a, &b| key(a).partial_cmp(&key(b)).unwrap_or(Ordering::Equal).then(a.cmp(&b)));
        for _ in 0..SNAKE {
            vals.extend(order.iter().map(|&e| snake[e]));
            idxs.extend(order.iter().map(|&e| e as f32));
        }
    }
    write_tile(ctx, val_dst, &v, &vals);
    write_tile(ctx, idx_dst, &i, &idxs);
    Ok(())
}
