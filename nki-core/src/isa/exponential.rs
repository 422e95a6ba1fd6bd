//! `exponential`: `exp(src - max_value)` with a running sum on the Vector
//! Engine's accumulators (NeuronCore-v4 and newer).

use super::enums::ReduceCmd;
use super::exec::{Input, rowwise};
use super::operand::{Operand, column};
use super::reduce::{Accumulators, accumulate, write_reduce_res};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{NkiError, Result, Tensor};

/// Optional arguments of [`exponential`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExponentialOpts<'a> {
    /// Subtracted before the exponential: a constant or a `(P, 1)` tile (default 0).
    pub max_value: Option<Operand<'a>>,
    /// `(P, 1)` tile receiving the accumulators after this instruction.
    pub reduce_res: Option<&'a Tensor>,
    /// How the accumulators are updated (default `idle`: left alone).
    pub reduce_cmd: Option<ReduceCmd>,
    /// The accumulators' start for `load_reduce`.
    pub reduce_init: Option<Operand<'a>>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.exponential(dst, src)`: `dst = exp(src - max_value)` in fp32; unless
/// `reduce_cmd` is `idle`, each row's fp32 sum of the results (before `dst`'s
/// rounding) is added to the Vector Engine accumulators (reset to 0 by
/// `reset_reduce`, loaded from `reduce_init` by `load_reduce`).
pub fn exponential(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: ExponentialOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.exponential";
    ctx.begin_generation_op(OP)?;
    ctx.record_spec(
        OP,
        &[Some(src), opts.max_value.and_then(Operand::tensor), opts.reduce_init.and_then(Operand::tensor)],
        &[Some(dst), opts.reduce_res],
    )?;
    let cmd = opts.reduce_cmd.unwrap_or(ReduceCmd::Idle);
    if cmd == ReduceCmd::Reset {
        return Err(NkiError::constraint(OP, "reduce_cmd=reset is not supported; use reset_reduce, reduce, load_reduce or idle"));
    }
    if cmd != ReduceCmd::LoadReduce && matches!(opts.reduce_init, Some(Operand::Tensor(_))) {
        return Err(NkiError::constraint(OP, "reduce_init is used by reduce_cmd=load_reduce only; leave it unset or 0.0"));
    }
    if cmd != ReduceCmd::LoadReduce
        && let Some(Operand::Scalar(v)) = opts.reduce_init
        && v != 0.0
    {
        return Err(NkiError::constraint(OP, format!("reduce_init={v} is used by reduce_cmd=load_reduce only; leave it unset or 0.0")));
    }
    let (x, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("src", &x), dst, src)?;
    let max = column(OP, "max_value", opts.max_value.unwrap_or(Operand::Scalar(0.0)), x.np)?;
    let init = match (cmd, opts.reduce_init) {
        (ReduceCmd::LoadReduce, i) => Some(column(OP, "reduce_init", i.unwrap_or(Operand::Scalar(0.0)), x.np)?),
        _ => None,
    };
    let mut sums = vec![0f32; x.np];
    rowwise(ctx, dst, &d, &[Input { tensor: src, tile: &x }], |p, rows, out| {
        let m = max.at(p);
        for (o, &v) in out.iter_mut().zip(rows[0]) {
            *o = NlOp::Exp.apply1(v - m);
        }
        sums[p] = out.iter().sum();
    })?;
    let regs = accumulate(ctx, Accumulators::Vector, NlOp::Add, cmd, &sums, init.as_ref());
    if let Some(res) = opts.reduce_res {
        write_reduce_res(ctx, OP, res, &regs, false)?;
    }
    Ok(())
}
