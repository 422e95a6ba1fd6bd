//! Free-axis reductions: `tensor_reduce` and `tensor_scalar_reduce`, plus the
//! engines' accumulator registers that `reduce_cmd` drives.

use super::alu;
use super::enums::ReduceCmd;
use super::exec::{Input, rowwise, write_tile};
use super::operand::{Column, Operand, column};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{NkiError, Result, Tensor};

/// Which accumulator register file an instruction uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Accumulators {
    /// Vector Engine: `tensor_scalar_reduce`, `range_select`.
    Vector,
    /// Scalar Engine: `activation`, `activation_reduce`.
    Scalar,
}

/// Applies `cmd` to the first `row_values.len()` registers of `which`, given each
/// partition row's reduction of this instruction's values, and returns the
/// registers' new values.
pub(crate) fn accumulate(ctx: &Ctx, which: Accumulators, op: NlOp, cmd: ReduceCmd, row_values: &[f32], init: Option<&Column>) -> Vec<f32> {
    let mut regs = ctx.accumulators(which);
    for (p, &v) in row_values.iter().enumerate() {
        let r = &mut regs[p];
        *r = match cmd {
            ReduceCmd::Idle => *r,
            ReduceCmd::Reset => op.identity(),
            ReduceCmd::Reduce => combine(op, *r, v),
            ReduceCmd::ResetReduce => combine(op, op.identity(), v),
            ReduceCmd::LoadReduce => combine(op, init.map_or(f32::NAN, |c| c.at(p)), v),
        };
    }
    regs[..row_values.len()].to_vec()
}

fn combine(op: NlOp, a: f32, b: f32) -> f32 {
    match op {
        NlOp::Maximum => alu::max_nan(a, b),
        _ => op.apply2(a, b),
    }
}

/// Writes register values into a `(P, 1)` `reduce_res` tile (negated when asked).
pub(crate) fn write_reduce_res(ctx: &Ctx, op: &'static str, res: &Tensor, vals: &[f32], negate: bool) -> Result<()> {
    let tile = TileView::of(op, "reduce_res", res)?;
    if tile.np != vals.len() || tile.nf != 1 {
        return Err(NkiError::shape(
            op,
            format!("reduce_res {} must be a ({}, 1) column, it is {} x {}", res.describe(), vals.len(), tile.np, tile.nf),
        ));
    }
    let v: Vec<f32> = if negate { vals.iter().map(|x| -x).collect() } else { vals.to_vec() };
    write_tile(ctx, res, &tile, &v);
    Ok(())
}

fn reducible(op: &str, o: NlOp) -> Result<()> {
    if !o.is_reduction() {
        return Err(NkiError::constraint(op, format!("{o} cannot reduce; use nl.add, nl.maximum, nl.minimum or nl.multiply")));
    }
    Ok(())
}

/// Optional arguments of [`tensor_reduce`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorReduceOpts<'a> {
    /// Multiply the result by -1 (free on the hardware).
    pub negate: Option<bool>,
    /// Accepted for fidelity; no numeric effect.
    pub keepdims: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.tensor_reduce(dst, op, data, axis)`: reduces the trailing free `axis` dims
/// of `data` (never the partition dim) with `op`, in fp32.
pub fn tensor_reduce(ctx: &Ctx, dst: &Tensor, op: NlOp, data: &Tensor, axis: &[i64], opts: TensorReduceOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.tensor_reduce";
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::Vector, &[data], &[dst])?;
    reducible(OP, op)?;
    let (x, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    let nd = data.ndim() as i64;
    let mut axes: Vec<i64> = axis.iter().map(|&a| if a < 0 { a + nd } else { a }).collect();
    axes.sort_unstable();
    let trailing = !axes.is_empty() && axes[0] >= 1 && axes.windows(2).all(|w| w[1] == w[0] + 1) && *axes.last().unwrap_or(&0) == nd - 1;
    if !trailing {
        return Err(NkiError::constraint(
            OP,
            format!(
                "axis {axis:?} of data {} must name the last free dims, ending at dim {} (the partition dim 0 cannot be reduced)",
                data.describe(),
                nd - 1
            ),
        ));
    }
    let inner: usize = axes.iter().map(|&a| data.shape()[a as usize]).product();
    let outer = x.nf / inner.max(1);
    if d.np != x.np || d.nf != outer {
        return Err(NkiError::shape(
            OP,
            format!(
                "dst {} must hold {} partitions x {outer} elements (the data's unreduced free dims), it holds {} x {}",
                dst.describe(),
                x.np,
                d.np,
                d.nf
            ),
        ));
    }
    let sign = if opts.negate.unwrap_or(false) { -1.0 } else { 1.0 };
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |_, rows, out| {
        for (o, chunk) in out.iter_mut().zip(rows[0].chunks(inner)) {
            *o = sign * alu::reduce(op, chunk, op.identity());
        }
    })
}

/// Optional arguments of [`tensor_scalar_reduce`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorScalarReduceOpts<'a> {
    /// `(P, 1)` tile that receives the accumulator registers.
    pub reduce_res: Option<&'a Tensor>,
    /// Not supported by the hardware yet; `true` is an error.
    pub reverse0: Option<bool>,
    /// How the Vector Engine accumulators are updated (default `reset_reduce`).
    pub reduce_cmd: Option<ReduceCmd>,
    /// Initial value for `load_reduce`.
    pub reduce_init: Option<Operand<'a>>,
    /// Write `-registers` into `reduce_res`.
    pub reduce_res_negate: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op)`:
/// `dst = data op0 operand0`, and each row's fp32 results fold into the Vector
/// Engine accumulators with `reduce_op`.
#[allow(clippy::too_many_arguments)]
pub fn tensor_scalar_reduce(
    ctx: &Ctx,
    dst: &Tensor,
    data: &Tensor,
    op0: NlOp,
    operand0: Operand<'_>,
    reduce_op: NlOp,
    opts: TensorScalarReduceOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.tensor_scalar_reduce";
    ctx.begin_op(OP)?;
    let reads: Vec<&Tensor> = [Some(data), operand0.tensor(), opts.reduce_init.and_then(Operand::tensor)].into_iter().flatten().collect();
    let writes: Vec<&Tensor> = [Some(dst), opts.reduce_res].into_iter().flatten().collect();
    ctx.record(OP, crate::profile::Unit::Vector, &reads, &writes)?;
    reducible(OP, reduce_op)?;
    alu::check_alu_scalar_op(OP, "op0", op0, "operand0", operand0)?;
    if opts.reverse0 == Some(true) {
        return Err(NkiError::constraint(OP, "reverse0=True is not supported by tensor_scalar_reduce"));
    }
    let cmd = opts.reduce_cmd.unwrap_or(ReduceCmd::ResetReduce);
    if opts.reduce_init.is_some() != (cmd == ReduceCmd::LoadReduce) {
        return Err(NkiError::constraint(OP, "reduce_init must be given exactly when reduce_cmd is load_reduce"));
    }
    let (x, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    super::tile::same_geometry(OP, ("dst", &d), ("data", &x), dst, data)?;
    let c0 = column(OP, "operand0", operand0, x.np)?;
    let init = opts.reduce_init.map(|o| column(OP, "reduce_init", o, x.np)).transpose()?;
    let mut row_red = vec![0f32; x.np];
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |p, rows, out| {
        alu::stage_from(op0, rows[0], out, c0.at(p), false);
        row_red[p] = alu::reduce(reduce_op, out, reduce_op.identity());
    })?;
    let regs = accumulate(ctx, Accumulators::Vector, reduce_op, cmd, &row_red, init.as_ref());
    if let Some(res) = opts.reduce_res {
        write_reduce_res(ctx, OP, res, &regs, opts.reduce_res_negate.unwrap_or(false))?;
    }
    Ok(())
}
