//! Index-driven ops: `iota`, `affine_select`, `range_select`.

use super::enums::ReduceCmd;
use super::exec::{Input, mark_written, rowwise};
use super::operand::{Operand, column};
use super::reduce::{Accumulators, accumulate, write_reduce_res};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{Buffer, NkiError, Result, Tensor};

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
    ctx.begin_op()?;
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
    mark_written(dst);
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
    ctx.begin_op()?;
    in_sbuf(OP, "dst", dst)?;
    in_sbuf(OP, "on_true_tile", on_true_tile)?;
    let cmp = opts.cmp_op.unwrap_or(NlOp::Equal);
    comparison(OP, "cmp_op", cmp)?;
    let (t, d) = (TileView::of(OP, "on_true_tile", on_true_tile)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("on_true_tile", &t), dst, on_true_tile)?;
    let base = pattern_values(OP, pattern, d.nf)?;
    let (off, cm) = (opts.offset.unwrap_or(0) as i32, channel_multiplier as i32);
    let fill = on_false_value as f32;
    rowwise(ctx, dst, &d, &[Input { tensor: on_true_tile, tile: &t }], |p, rows, out| {
        let c = off.wrapping_add(cm.wrapping_mul(p as i32));
        for ((o, &x), &b) in out.iter_mut().zip(rows[0]).zip(&base) {
            let keep = cmp.apply2(c.wrapping_add(b) as f32, 0.0) != 0.0;
            *o = if keep { x } else { fill };
        }
    })
}

/// Optional arguments of [`range_select`].
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
    ctx.begin_op()?;
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
    rowwise(ctx, dst, &d, &[Input { tensor: on_true_tile, tile: &t }], |p, rows, out| {
        let (lo, hi) = (b0.at(p), b1.at(p));
        let mut m = f32::NEG_INFINITY;
        for (j, (o, &x)) in out.iter_mut().zip(rows[0]).enumerate() {
            let idx = (start + j as i64) as f32;
            let keep = comp_op0.apply2(idx, lo) != 0.0 && comp_op1.apply2(idx, hi) != 0.0;
            *o = if keep { x } else { fill };
            m = super::alu::max_nan(m, *o);
        }
        row_max[p] = m;
    })?;
    let regs = accumulate(ctx, Accumulators::Vector, reduce_op, opts.reduce_cmd.unwrap_or(ReduceCmd::ResetReduce), &row_max, None);
    if let Some(res) = opts.reduce_res {
        write_reduce_res(ctx, OP, res, &regs, false)?;
    }
    Ok(())
}
