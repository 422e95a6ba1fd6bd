//! Scalar Engine: `activation` and `activation_reduce`.

use super::enums::ReduceCmd;
use super::exec::{Input, rowwise};
use super::operand::{Column, Operand, column};
use super::reduce::{Accumulators, accumulate, write_reduce_res};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::numeric::exp::{exp_affine, exp_affine_sum};
use crate::{NkiError, Result, Tensor};

/// Optional arguments of [`activation`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivationOpts<'a> {
    /// Added after scaling: a `(P, 1)` column, or a scalar on trn2 and later.
    pub bias: Option<Operand<'a>>,
    /// Multiplies the input: a scalar or a `(P, 1)` fp32 column (default 1.0).
    pub scale: Option<Operand<'a>>,
    /// Reduction of the activated row (must be `nl.add`).
    pub reduce_op: Option<NlOp>,
    /// `(P, 1)` tile that receives the accumulator registers.
    pub reduce_res: Option<&'a Tensor>,
    /// How the Scalar Engine accumulators are updated (default `idle`).
    pub reduce_cmd: Option<ReduceCmd>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.activation(dst, op, data, bias=, scale=)`: `dst = op(data * scale + bias)`
/// in fp32, rounded once to `dst.dtype`. With `reduce_op=nl.add`, each row's fp32
/// outputs are summed into the Scalar Engine accumulators per `reduce_cmd`, and
/// `reduce_res` (if given) receives them.
pub fn activation(ctx: &Ctx, dst: &Tensor, op: NlOp, data: &Tensor, opts: ActivationOpts<'_>) -> Result<()> {
    activate("nisa.activation", ctx, dst, op, data, opts)
}

/// Optional arguments of [`activation_reduce`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivationReduceOpts<'a> {
    /// See [`ActivationOpts::bias`].
    pub bias: Option<Operand<'a>>,
    /// See [`ActivationOpts::scale`].
    pub scale: Option<Operand<'a>>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.activation_reduce(dst, op, data, reduce_op, reduce_res)`: `activation`
/// with `reduce_cmd=reset_reduce`, writing each row's sum into `reduce_res`.
pub fn activation_reduce(
    ctx: &Ctx,
    dst: &Tensor,
    op: NlOp,
    data: &Tensor,
    reduce_op: NlOp,
    reduce_res: &Tensor,
    opts: ActivationReduceOpts<'_>,
) -> Result<()> {
    let full = ActivationOpts {
        bias: opts.bias,
        scale: opts.scale,
        reduce_op: Some(reduce_op),
        reduce_res: Some(reduce_res),
        reduce_cmd: Some(ReduceCmd::ResetReduce),
        name: opts.name,
    };
    activate("nisa.activation_reduce", ctx, dst, op, data, full)
}

fn activate(name: &'static str, ctx: &Ctx, dst: &Tensor, op: NlOp, data: &Tensor, opts: ActivationOpts<'_>) -> Result<()> {
    ctx.begin_op(name)?;
    let mut writes = vec![dst];
    writes.extend(opts.reduce_res);
    let reads: Vec<&Tensor> =
        [Some(data), opts.bias.and_then(Operand::tensor), opts.scale.and_then(Operand::tensor)].into_iter().flatten().collect();
    ctx.record(name, crate::profile::Unit::Scalar, &reads, &writes)?;
    if !op.is_unary() {
        return Err(NkiError::constraint(
            name,
            format!("op={op} is an ALU op; activation takes an activation function such as nl.exp or nl.copy"),
        ));
    }
    let (x, d) = (TileView::of(name, "data", data)?, TileView::of(name, "dst", dst)?);
    same_geometry(name, ("dst", &d), ("data", &x), dst, data)?;
    let scale = column(name, "scale", opts.scale.unwrap_or(Operand::Scalar(1.0)), x.np)?;
    if matches!(opts.bias, Some(Operand::Scalar(_))) && !ctx.hw().has_scalar_activation_bias {
        return Err(NkiError::constraint(name, format!("a scalar bias needs trn2 or later; on {} pass a (P, 1) column", ctx.generation())));
    }
    let bias = match opts.bias {
        Some(b) => column(name, "bias", b, x.np)?,
        None => Column::Scalar(0.0),
    };
    let cmd = opts.reduce_cmd.unwrap_or(ReduceCmd::Idle);
    let reduces = opts.reduce_op.is_some() || opts.reduce_res.is_some() || cmd != ReduceCmd::Idle;
    if reduces && opts.reduce_op.is_some_and(|o| o != NlOp::Add) {
        return Err(NkiError::constraint(
            name,
            format!("reduce_op must be nl.add on the Scalar engine, got {}", opts.reduce_op.unwrap_or(NlOp::Add)),
        ));
    }
    if cmd == ReduceCmd::LoadReduce {
        return Err(NkiError::constraint(name, "reduce_cmd=load_reduce is not available on the Scalar engine"));
    }
    let mut sums = vec![0f32; x.np];
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |p, rows, out| {
        let (s, b) = (scale.at(p), bias.at(p));
        match op {
            NlOp::Exp if reduces => sums[p] = exp_affine_sum(rows[0], out, s, b),
            NlOp::Exp => exp_affine(rows[0], out, s, b),
            _ => {
                for (o, &v) in out.iter_mut().zip(rows[0]) {
                    *o = op.apply1(v * s + b);
                }
                if reduces {
                    sums[p] = super::alu::reduce(NlOp::Add, out, 0.0);
                }
            }
        }
    })?;
    if reduces {
        let regs = accumulate(ctx, Accumulators::Scalar, NlOp::Add, cmd, &sums, None);
        if let Some(res) = opts.reduce_res {
            write_reduce_res(ctx, name, res, &regs, false)?;
        }
    }
    Ok(())
}
