//! `select_reduce`: a predicated choice between a tile and a value, with a
//! running maximum on the Vector Engine's accumulators.

use super::alu;
use super::elementwise::both_psum;
use super::enums::ReduceCmd;
use super::exec::{Input, rowwise};
use super::operand::{Operand, column};
use super::reduce::{Accumulators, accumulate, write_reduce_res};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{Dtype, NkiError, Result, Tensor};

/// Optional arguments of [`select_reduce`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct SelectReduceOpts<'a> {
    /// `(P, 1)` tile receiving the accumulators after this instruction.
    pub reduce_res: Option<&'a Tensor>,
    /// How the accumulators are updated (default `idle`: left alone).
    pub reduce_cmd: Option<ReduceCmd>,
    /// The reduction: only `nl.maximum` (the default).
    pub reduce_op: Option<NlOp>,
    /// Choose `on_true` where the predicate is zero instead.
    pub reverse_pred: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.select_reduce(dst, predicate, on_true, on_false)`: `dst = on_true` where
/// `predicate` is nonzero (zero with `reverse_pred`), else `on_false` (a
/// constant or a `(P, 1)` column); unless `reduce_cmd` is `idle`, each row's
/// maximum of the fp32 results goes into the Vector Engine accumulators
/// (`reset_reduce` starts them from -inf). `predicate` is int8/uint8/int16/uint16.
#[allow(clippy::too_many_arguments)]
pub fn select_reduce(
    ctx: &Ctx,
    dst: &Tensor,
    predicate: &Tensor,
    on_true: &Tensor,
    on_false: Operand<'_>,
    opts: SelectReduceOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.select_reduce";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(predicate), Some(on_true), on_false.tensor()], &[Some(dst), opts.reduce_res])?;
    let op = opts.reduce_op.unwrap_or(NlOp::Maximum);
    if op != NlOp::Maximum {
        return Err(NkiError::constraint(OP, format!("reduce_op must be nl.maximum, not {op}")));
    }
    let cmd = opts.reduce_cmd.unwrap_or(ReduceCmd::Idle);
    if matches!(cmd, ReduceCmd::Reset | ReduceCmd::LoadReduce) {
        return Err(NkiError::constraint(OP, "reduce_cmd must be idle, reset_reduce or reduce"));
    }
    if !matches!(predicate.dtype(), Dtype::I8 | Dtype::U8 | Dtype::I16 | Dtype::U16) {
        return Err(NkiError::dtype(
            OP,
            format!("predicate {} must be int8, uint8, int16 or uint16, not {}", predicate.describe(), predicate.dtype()),
        ));
    }
    let (m, t, d) = (TileView::of(OP, "predicate", predicate)?, TileView::of(OP, "on_true", on_true)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("on_true", &t), ("predicate", &m), on_true, predicate)?;
    same_geometry(OP, ("on_true", &t), ("dst", &d), on_true, dst)?;
    both_psum(OP, ("on_true", on_true), ("predicate", predicate))?;
    let fallback = column(OP, "on_false", on_false, t.np)?;
    let reverse = opts.reverse_pred.unwrap_or(false);
    let mut maxes = vec![f32::NEG_INFINITY; t.np];
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: predicate, tile: &m }, Input { tensor: on_true, tile: &t }], |p, rows, out| {
        for ((o, &c), &v) in out.iter_mut().zip(rows[0]).zip(rows[1]) {
            *o = if (c != 0.0) != reverse { v } else { fallback.at(p) };
        }
        maxes[p] = alu::reduce(NlOp::Maximum, out, f32::NEG_INFINITY);
    })?;
    let regs = accumulate(ctx, Accumulators::Vector, NlOp::Maximum, cmd, &maxes, None);
    if let Some(res) = opts.reduce_res {
        write_reduce_res(ctx, OP, res, &regs, false)?;
    }
    Ok(())
}
