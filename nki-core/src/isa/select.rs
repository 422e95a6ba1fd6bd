//! Index-driven ops: `iota`, `affine_select`, `range_select`.

use super::enums::ReduceCmd;
use super::exec::{Input, rowwise};
use super::operand::{Operand, column};
use super::reduce::{Accumulators, accumulate, write_reduce_res};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{Buffer, NkiError, Result, Tensor};
use std::ops::Range;

/// The fp32 lowest value, the hardware's mask sentinel (`-3.4028235e38`).
pub const FLOAT32_MIN: f64 = f32::MIN as f64;

fn in_sbuf(op: &str, role: &str, t: &Tensor) -> Result<()> {
    if t.buffer() != Buffer::Sbuf {
        return Err(NkiError::constraint(op, format!("{role} {} must be in SBUF (the GpSimd engine cannot access PSUM)", t.describe())));
    }
    Ok(())
}

/// Values `Σ step_k * i_k` of an access pattern over its elements in row-major
/// order, computed in wrapping int32 as the hardware does.
fn pattern_values(op: &str, pattern: &[[i64; 2]], nf: usize) -> Result<Vec<i32>> {
    if pattern.len() > 4 {
        return Err(NkiError::constraint(op, format!("pattern {pattern:?} has {} dims; at most 4 are supported", pattern.len())));
    }
    let n: i64 = pattern.iter().map(|&[_, c]| c).product();
    if n < 0 || n as usize != nf {
        return Err(NkiError::shape(op, format!("pattern {pattern:?} covers {n} elements but the tile has {nf} per partition")));
    }
    let mut vals = vec![0i32];
    for &[step, count] in pattern {
        let mut next = Vec::with_capacity(vals.len() * count as usize);
        for v in &vals {
            for i in 0..count {
                next.push(v.wrapping_add((step as i32).wrapping_mul(i as i32)));
            }
        }
        vals = next;
    }
    Ok(vals)
}

/// Optional arguments of [`iota`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct IotaOpts<'a> {
    /// Constant added to every value (default 0).
    pub offset: Option<i64>,
    /// Multiplier of the partition index (default 0).
    pub channel_multiplier: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.iota(dst, pattern, offset=, channel_multiplier=)`: fills an SBUF tile
/// with `offset + p * channel_multiplier + Σ step_k * i_k`, computed in int32 and
/// cast to `dst.dtype` (float tiles round per the precision model).
pub fn iota(ctx: &Ctx, dst: &Tensor, pattern: &[[i64; 2]], opts: IotaOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.iota";
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::GpSimd, &[], &[dst])?;
    in_sbuf(OP, "dst", dst)?;
    let d = TileView::of(OP, "dst", dst)?;
    let base = pattern_values(OP, pattern, d.nf)?;
    let (off, cm) = (opts.offset.unwrap_or(0) as i32, opts.channel_multiplier.unwrap_or(0) as i32);
    let dt = dst.dtype();
    let mut cells = dst.write();
    let mut row = vec![0f32; d.nf];
    for p in 0..d.np {
        let c = off.wrapping_add(cm.wrapping_mul(p as i32));
        for (r, &b) in row.iter_mut().zip(&base) {
            let v = c.wrapping_add(b);
            *r = if dt.is_float() { dt.f32_to_cell(v as f32, ctx.rounds()) } else { dt.i64_to_cell(v as i64) };
        }
        d.row_layout(p).scatter_with(&mut cells, &row, |x| x);
    }
    drop(cells);
    Ok(())
}

fn comparison(op: &str, role: &str, o: NlOp) -> Result<()> {
    if !matches!(o, NlOp::Equal | NlOp::Less | NlOp::LessEqual | NlOp::Greater | NlOp::GreaterEqual | NlOp::NotEqual) {
        return Err(NkiError::constraint(
            op,
            format!("{role}={o} is not a comparison (use nl.equal, nl.less, nl.less_equal, nl.greater or nl.greater_equal)"),
        ));
    }
    Ok(())
}

/// Optional arguments of [`affine_select`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct AffineSelectOpts<'a> {
    /// Comparison of the affine value against 0 (default `nl.equal`).
    pub cmp_op: Option<NlOp>,
    /// Constant term of the affine value (default 0).
    pub offset: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value)`:
/// keeps `on_true_tile` where `cmp_op(offset + p * channel_multiplier + Σ step_k * i_k, 0)`
/// holds and writes `on_false_value` elsewhere. Both tiles in SBUF.
#[allow(clippy::too_many_arguments)]
pub fn affine_select(
    ctx: &Ctx,
    dst: &Tensor,
    pattern: &[[i64; 2]],
    channel_multiplier: i64,
    on_true_tile: &Tensor,
    on_false_value: f64,
    opts: AffineSelectOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.affine_select";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, crate::profile::Unit::GpSimd, &[on_true_tile], &[dst])?;
    in_sbuf(OP, "dst", dst)?;
    in_sbuf(OP, "on_true_tile", on_true_tile)?;
    let cmp = opts.cmp_op.unwrap_or(NlOp::Equal);
    comparison(OP, "cmp_op", cmp)?;
    let (t, d) = (TileView::of(OP, "on_true_tile", on_true_tile)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("on_true_tile", &t), dst, on_true_tile)?;
    let base = pattern_values(OP, pattern, d.nf)?;
    let (off, cm) = (opts.offset.unwrap_or(0) as i32, channel_multiplier as i32);
    let fill = on_false_value as f32;
    // A one-dimensional pattern makes the affine value monotone along the row (unless
    // it wraps around int32), so each row keeps one span of elements.
    let step = match pattern {
        [[step, _]] => Some(*step),
        _ => None,
    };
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: on_true_tile, tile: &t }], |p, rows, out| {
        let c = off.wrapping_add(cm.wrapping_mul(p as i32));
        let last = i64::from(c) + step.unwrap_or(0) * (d.nf as i64 - 1);
        let span = step
            .filter(|_| i32::try_from(last).is_ok())
            .and_then(|s| kept_span(cmp, |j| c.wrapping_add(base[j]) as f32, 0.0, d.nf, s >= 0));
        match span {
            Some(keep) => select_span(out, rows[0], keep, fill),
            None => {
                for ((o, &x), &b) in out.iter_mut().zip(rows[0]).zip(&base) {
                    let keep = cmp.apply2(c.wrapping_add(b) as f32, 0.0) != 0.0;
                    *o = if keep { x } else { fill };
                }
            }
        }
    })
}

/// The elements `j` in `0..n` where `op(value(j), rhs)` holds, as one span, given
/// that `value` is NaN-free and monotone in `j` (non-decreasing when `increasing`,
/// else non-increasing); `None` for `not_equal`, whose kept set is not a span.
fn kept_span(op: NlOp, value: impl Fn(usize) -> f32, rhs: f32, n: usize, increasing: bool) -> Option<Range<usize>> {
    if op == NlOp::NotEqual {
        return None;
    }
    if rhs.is_nan() {
        return Some(0..0);
    }
    let v = |j: usize| if increasing { value(j) } else { value(n - 1 - j) };
    // First `j` where `pred(v(j))` fails, for a `pred` that holds on a prefix.
    let first_fail = |pred: &dyn Fn(f32) -> bool| {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(v(mid)) { lo = mid + 1 } else { hi = mid }
        }
        lo
    };
    let span = match op {
        NlOp::Greater => first_fail(&|x| x <= rhs)..n,
        NlOp::GreaterEqual => first_fail(&|x| x < rhs)..n,
        NlOp::Less => 0..first_fail(&|x| x < rhs),
        NlOp::LessEqual => 0..first_fail(&|x| x <= rhs),
        _ => first_fail(&|x| x < rhs)..first_fail(&|x| x <= rhs),
    };
    Some(if increasing { span } else { n - span.end..n - span.start })
}

/// Writes `x` inside `keep` and `fill` outside it.
fn select_span(out: &mut [f32], x: &[f32], keep: Range<usize>, fill: f32) {
    let keep = keep.start.min(keep.end)..keep.end;
    out[..keep.start].fill(fill);
    out[keep.clone()].copy_from_slice(&x[keep.clone()]);
    out[keep.end..].fill(fill);
}

/// Optional arguments of [`range_select`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct RangeSelectOpts<'a> {
    /// Accumulator update (default `reset_reduce`).
    pub reduce_cmd: Option<ReduceCmd>,
    /// `(P, 1)` tile receiving the row max.
    pub reduce_res: Option<&'a Tensor>,
    /// Reduction (must be `nl.maximum`).
    pub reduce_op: Option<NlOp>,
    /// Index of the tile's first free element (default 0).
    pub range_start: Option<i64>,
    /// Fill value; the hardware only supports `FLOAT32_MIN`.
    pub on_false_value: Option<f64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1)`: keeps
/// element `j` of row `p` when `comp_op0(range_start + j, bound0[p])` and
/// `comp_op1(range_start + j, bound1[p])` hold (compared in fp32), writes
/// `FLOAT32_MIN` elsewhere, and max-reduces each row's fp32 results into the Vector
/// Engine accumulators. trn2 and later.
#[allow(clippy::too_many_arguments)]
pub fn range_select(
    ctx: &Ctx,
    dst: &Tensor,
    on_true_tile: &Tensor,
    comp_op0: NlOp,
    comp_op1: NlOp,
    bound0: &Tensor,
    bound1: &Tensor,
    opts: RangeSelectOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.range_select";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    let writes: Vec<&Tensor> = [Some(dst), opts.reduce_res].into_iter().flatten().collect();
    ctx.record(OP, crate::profile::Unit::Vector, &[on_true_tile, bound0, bound1], &writes)?;
    if !ctx.hw().has_range_select {
        return Err(NkiError::constraint(OP, format!("range_select needs trn2 or later; the launch targets {}", ctx.generation())));
    }
    comparison(OP, "comp_op0", comp_op0)?;
    comparison(OP, "comp_op1", comp_op1)?;
    // Compared as fp32: kernels write the constant as -3.4028235e38, which is f32::MIN only after rounding.
    if let Some(v) = opts.on_false_value.filter(|&v| v as f32 != f32::MIN) {
        return Err(NkiError::constraint(OP, format!("on_false_value must be FLOAT32_MIN (-3.4028235e38), got {v}")));
    }
    let reduce_op = opts.reduce_op.unwrap_or(NlOp::Maximum);
    if reduce_op != NlOp::Maximum {
        return Err(NkiError::constraint(OP, format!("reduce_op must be nl.maximum, got {reduce_op}")));
    }
    let (t, d) = (TileView::of(OP, "on_true_tile", on_true_tile)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("on_true_tile", &t), dst, on_true_tile)?;
    if !on_true_tile.dtype().is_float() {
        return Err(NkiError::dtype(OP, format!("on_true_tile {} must be a float tile", on_true_tile.describe())));
    }
    let start = opts.range_start.unwrap_or(0);
    if start < 0 || start + d.nf as i64 > 1 << 24 {
        return Err(NkiError::constraint(
            OP,
            format!("range_start {start} + {} elements must stay within [0, 2^24) so indices are exact in fp32", d.nf),
        ));
    }
    let b0 = column(OP, "bound0", Operand::Tensor(bound0), t.np)?;
    let b1 = column(OP, "bound1", Operand::Tensor(bound1), t.np)?;
    let fill = f32::MIN;
    let mut row_max = vec![0f32; t.np];
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: on_true_tile, tile: &t }], |p, rows, out| {
        let (lo, hi) = (b0.at(p), b1.at(p));
        // Indices grow along the row, so each bound keeps one span (not_equal aside).
        let index = |j: usize| (start + j as i64) as f32;
        match (kept_span(comp_op0, index, lo, d.nf, true), kept_span(comp_op1, index, hi, d.nf, true)) {
            (Some(a), Some(b)) => select_span(out, rows[0], a.start.max(b.start)..a.end.min(b.end), fill),
            _ => {
                for (j, (o, &x)) in out.iter_mut().zip(rows[0]).enumerate() {
                    let keep = comp_op0.apply2(index(j), lo) != 0.0 && comp_op1.apply2(index(j), hi) != 0.0;
                    *o = if keep { x } else { fill };
                }
            }
        }
        row_max[p] = super::alu::reduce(NlOp::Maximum, out, f32::NEG_INFINITY);
    })?;
    let regs = accumulate(ctx, Accumulators::Vector, reduce_op, opts.reduce_cmd.unwrap_or(ReduceCmd::ResetReduce), &row_max, None);
    if let Some(res) = opts.reduce_res {
        write_reduce_res(ctx, OP, res, &regs, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_spans_match_elementwise_comparison() {
        let ops = [NlOp::Greater, NlOp::GreaterEqual, NlOp::Less, NlOp::LessEqual, NlOp::Equal];
        for n in [0usize, 1, 7, 16] {
            for increasing in [true, false] {
                let value = |j: usize| if increasing { j as f32 - 3.0 } else { 4.0 - j as f32 };
                for rhs in [-10.0, -3.0, 0.0, 0.5, 2.0, 4.0, 30.0, f32::NAN] {
                    for op in ops {
                        let span = kept_span(op, value, rhs, n, increasing).expect("order comparisons keep a span");
                        for j in 0..n {
                            let want = op.apply2(value(j), rhs) != 0.0;
                            assert_eq!(span.contains(&j), want, "{op} n={n} inc={increasing} rhs={rhs} j={j}");
                        }
                    }
                }
            }
        }
        assert!(kept_span(NlOp::NotEqual, |j| j as f32, 1.0, 4, true).is_none());
        let mut out = [0.0; 5];
        select_span(&mut out, &[1.0, 2.0, 3.0, 4.0, 5.0], Range { start: 3, end: 2 }, -1.0);
        assert_eq!(out, [-1.0; 5]);
        select_span(&mut out, &[1.0, 2.0, 3.0, 4.0, 5.0], 1..3, -1.0);
        assert_eq!(out, [-1.0, 2.0, 3.0, -1.0, -1.0]);
    }
}
