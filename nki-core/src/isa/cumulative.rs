//! `tensor_scalar_cumulative`: a tensor-scalar op followed by a running
//! reduction along the free axis, on the Vector Engine's accumulators.

use super::enums::ReduceCmd;
use super::exec::{Input, rowwise};
use super::operand::{Operand, column};
use super::reduce::Accumulators;
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{Dtype, NkiError, Result, Tensor};

/// Optional arguments of [`tensor_scalar_cumulative`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorScalarCumulativeOpts<'a> {
    /// The accumulators' start for `load_reduce`: a constant or a `(P, 1)` tile.
    pub imm1: Option<Operand<'a>>,
    /// How the accumulators start (default `reset_reduce`).
    pub reduce_cmd: Option<ReduceCmd>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// The register start `reset_reduce` gives `op1`.
fn reset_value(op1: NlOp) -> f32 {
    match op1 {
        NlOp::Multiply => 1.0,
        NlOp::Maximum => f32::NEG_INFINITY,
        NlOp::Minimum => f32::INFINITY,
        _ => 0.0,
    }
}

/// `nisa.tensor_scalar_cumulative(dst, src, op0, op1, imm0)`: per partition,
/// `reg = op1(src[i] op0 imm0, reg)` and `dst[i] = reg` along the free axis,
/// the register starting from `op1`'s identity (`reset_reduce`), from `imm1`
/// (`load_reduce`) or from the accumulator's value (`reduce`); the final
/// registers stay in the accumulators. `op1` is add, subtract, multiply,
/// maximum or minimum; 32-bit integer tiles are not accepted.
#[allow(clippy::too_many_arguments)]
pub fn tensor_scalar_cumulative(
    ctx: &Ctx,
    dst: &Tensor,
    src: &Tensor,
    op0: NlOp,
    op1: NlOp,
    imm0: Operand<'_>,
    opts: TensorScalarCumulativeOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.tensor_scalar_cumulative";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(src), imm0.tensor(), opts.imm1.and_then(Operand::tensor)], &[Some(dst)])?;
    if !op0.is_binary() {
        return Err(NkiError::constraint(OP, format!("op0 {op0} is not a binary ALU operator")));
    }
    if !matches!(op1, NlOp::Add | NlOp::Subtract | NlOp::Multiply | NlOp::Maximum | NlOp::Minimum) {
        return Err(NkiError::constraint(OP, format!("op1 {op1} cannot accumulate; use add, subtract, multiply, maximum or minimum")));
    }
    for (role, t) in [("src", src), ("dst", dst)] {
        if matches!(t.dtype(), Dtype::I32 | Dtype::U32) {
            return Err(NkiError::dtype(OP, format!("{role} {} is {}; 32-bit integer tiles are not supported", t.describe(), t.dtype())));
        }
    }
    let (x, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("src", &x), dst, src)?;
    let c0 = column(OP, "imm0", imm0, x.np)?;
    let mut regs: Vec<f32> = match (opts.reduce_cmd.unwrap_or(ReduceCmd::ResetReduce), opts.imm1) {
        (ReduceCmd::ResetReduce, _) => vec![reset_value(op1); x.np],
        (ReduceCmd::LoadReduce, Some(init)) => {
            let c = column(OP, "imm1", init, x.np)?;
            (0..x.np).map(|p| c.at(p)).collect()
        }
        (ReduceCmd::LoadReduce, None) => return Err(NkiError::constraint(OP, "reduce_cmd=load_reduce needs imm1, the registers' start")),
        (ReduceCmd::Reduce, _) => ctx.accumulators(Accumulators::Vector)[..x.np].to_vec(),
        (cmd, _) => return Err(NkiError::constraint(OP, format!("reduce_cmd must be reset_reduce, reduce or load_reduce, not {cmd:?}"))),
    };
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: src, tile: &x }], |p, rows, out| {
        let (s, mut reg) = (c0.at(p), regs[p]);
        for (o, &v) in out.iter_mut().zip(rows[0]) {
            reg = op1.apply2(op0.apply2(v, s), reg);
            *o = reg;
        }
        regs[p] = reg;
    })?;
    ctx.accumulators(Accumulators::Vector)[..x.np].copy_from_slice(&regs);
    Ok(())
}
