//! `activate2`: an activation after two tensor-scalar stages, with an optional
//! free-axis reduction into the Scalar Engine accumulators (NeuronCore-v4 and newer).

use super::enums::ReduceCmd;
use super::exec::{Input, rowwise};
use super::operand::{Operand, column};
use super::reduce::{Accumulators, accumulate, write_reduce_res};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::{NlOp, prelu_with_slope};
use crate::{NkiError, Result, Tensor};

/// The `(op0, op1)` pairs of the tensor-scalar stage the docs list.
const STAGES: [(NlOp, NlOp); 6] = [
    (NlOp::Multiply, NlOp::Add),
    (NlOp::Multiply, NlOp::Subtract),
    (NlOp::Multiply, NlOp::Bypass),
    (NlOp::Add, NlOp::Bypass),
    (NlOp::Subtract, NlOp::Bypass),
    (NlOp::Bypass, NlOp::Bypass),
];

/// The reductions nki-rs has among those the docs list (`nl.abs_max` and
/// `nl.abs_min` are documented too).
const REDUCTIONS: [NlOp; 3] = [NlOp::Add, NlOp::Maximum, NlOp::Minimum];

/// Optional arguments of [`activate2`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct Activate2Opts<'a> {
    /// The slope of `nl.prelu` below zero: a scalar or a `(P, 1)` column (default 0).
    pub relu_param: Option<Operand<'a>>,
    /// The first stage computes `imm0 <op0> data`.
    pub reverse0: Option<bool>,
    /// The second stage computes `imm1 <op1> result`.
    pub reverse1: Option<bool>,
    /// Reduction of each activated row (default `nl.add` when reducing).
    pub reduce_op: Option<NlOp>,
    /// `(P, 1)` tile receiving the accumulators after this instruction.
    pub reduce_res: Option<&'a Tensor>,
    /// How the Scalar Engine accumulators are updated (default `idle`).
    pub reduce_cmd: Option<ReduceCmd>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.activate2(dst, op, data, imm0, imm1, op0, op1)`:
/// `dst = op((data <op0> imm0) <op1> imm1)` in fp32, rounded once to `dst`'s
/// dtype; `nl.bypass` skips a stage, `reverse0` / `reverse1` swap a stage's
/// operands, the immediates are scalars or `(P, 1)` columns. With a reduction,
/// each row's fp32 results fold with `reduce_op` into the Scalar Engine
/// accumulators per `reduce_cmd`, and `reduce_res` (if given) receives them.
#[allow(clippy::too_many_arguments)]
pub fn activate2(
    ctx: &Ctx,
    dst: &Tensor,
    op: NlOp,
    data: &Tensor,
    imm0: Operand<'_>,
    imm1: Operand<'_>,
    op0: NlOp,
    op1: NlOp,
    opts: Activate2Opts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.activate2";
    ctx.begin_generation_op(OP)?;
    ctx.record_spec(
        OP,
        &[Some(data), imm0.tensor(), imm1.tensor(), opts.relu_param.and_then(Operand::tensor)],
        &[Some(dst), opts.reduce_res],
    )?;
    if !op.is_unary() {
        return Err(NkiError::constraint(OP, format!("op={op} is an ALU op; activate2 takes an activation function such as nl.exp")));
    }
    if !STAGES.contains(&(op0, op1)) {
        let listed: Vec<String> = STAGES.iter().map(|(a, b)| format!("({a}, {b})")).collect();
        return Err(NkiError::constraint(
            OP,
            format!("(op0, op1) = ({op0}, {op1}) is not a documented stage; use one of {}", listed.join(", ")),
        ));
    }
    let (r0, r1) = (opts.reverse0.unwrap_or(false), opts.reverse1.unwrap_or(false));
    if (r0 && op0 == NlOp::Bypass) || (r1 && op1 == NlOp::Bypass) {
        return Err(NkiError::constraint(OP, "reverse0 / reverse1 need their op0 / op1 to be set (not nl.bypass)"));
    }
    let cmd = opts.reduce_cmd.unwrap_or(ReduceCmd::Idle);
    let reduces = opts.reduce_op.is_some() || opts.reduce_res.is_some() || cmd != ReduceCmd::Idle;
    let rop = opts.reduce_op.unwrap_or(NlOp::Add);
    if reduces && !REDUCTIONS.contains(&rop) {
        return Err(NkiError::constraint(OP, format!("reduce_op={rop} is not supported; use nl.add, nl.maximum or nl.minimum")));
    }
    if cmd == ReduceCmd::LoadReduce {
        return Err(NkiError::constraint(OP, "reduce_cmd=load_reduce is not available on the Scalar engine"));
    }
    let (x, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("data", &x), dst, data)?;
    let (c0, c1) = (column(OP, "imm0", imm0, x.np)?, column(OP, "imm1", imm1, x.np)?);
    let slope = column(OP, "relu_param", opts.relu_param.unwrap_or(Operand::Scalar(0.0)), x.np)?;
    let mut folds = vec![0f32; x.np];
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |p, rows, out| {
        let stages = [(op0, c0.at(p), r0), (op1, c1.at(p), r1)];
        for (o, &v) in out.iter_mut().zip(rows[0]) {
            let mut t = v;
            for &(stage, c, rev) in &stages {
                if stage != NlOp::Bypass {
                    t = if rev { stage.apply2(c, t) } else { stage.apply2(t, c) };
                }
            }
            *o = if op == NlOp::Prelu { prelu_with_slope(t, slope.at(p)) } else { op.apply1(t) };
        }
        if reduces {
            folds[p] = super::alu::reduce(rop, out, rop.identity());
        }
    })?;
    if reduces {
        let regs = accumulate(ctx, Accumulators::Scalar, rop, cmd, &folds, None);
        if let Some(res) = opts.reduce_res {
            write_reduce_res(ctx, OP, res, &regs, false)?;
        }
    }
    Ok(())
}
