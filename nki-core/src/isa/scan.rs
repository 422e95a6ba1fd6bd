//! `tensor_tensor_scan`: a running recurrence along the free axis (Vector Engine).

use super::elementwise::both_psum;
use super::exec::{Input, rowwise};
use super::operand::{Operand, column};
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{NkiError, Result, Tensor};

/// Optional arguments of [`tensor_tensor_scan`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorTensorScanOpts<'a> {
    /// `data0` is the right operand of `op0` (the running value the left).
    pub reverse0: Option<bool>,
    /// `data1` is the left operand of `op1`.
    pub reverse1: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.tensor_tensor_scan(dst, data0, data1, initial, op0, op1)`: per partition,
/// `r[0] = (data0[0] op0 initial) op1 data1[0]` and
/// `r[i] = (data0[i] op0 r[i-1]) op1 data1[i]`; `dst = r`. The running value
/// stays in fp32 (only `dst` is rounded); `initial` is a constant or a `(P, 1)`
/// tile; `data0` and `data1` may not both be in PSUM.
#[allow(clippy::too_many_arguments)]
pub fn tensor_tensor_scan(
    ctx: &Ctx,
    dst: &Tensor,
    data0: &Tensor,
    data1: &Tensor,
    initial: Operand<'_>,
    op0: NlOp,
    op1: NlOp,
    opts: TensorTensorScanOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.tensor_tensor_scan";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(data0), Some(data1), initial.tensor()], &[Some(dst)])?;
    for (role, op) in [("op0", op0), ("op1", op1)] {
        if !op.is_binary() {
            return Err(NkiError::constraint(OP, format!("{role} {op} is not a binary ALU operator")));
        }
    }
    let (a, b, d) = (TileView::of(OP, "data0", data0)?, TileView::of(OP, "data1", data1)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("data0", &a), ("data1", &b), data0, data1)?;
    same_geometry(OP, ("data0", &a), ("dst", &d), data0, dst)?;
    both_psum(OP, ("data0", data0), ("data1", data1))?;
    let init = column(OP, "initial", initial, a.np)?;
    let (r0, r1) = (opts.reverse0.unwrap_or(false), opts.reverse1.unwrap_or(false));
    ctx.validated()?;
    rowwise(ctx, dst, &d, &[Input { tensor: data0, tile: &a }, Input { tensor: data1, tile: &b }], |p, rows, out| {
        let mut acc = init.at(p);
        for ((o, &x0), &x1) in out.iter_mut().zip(rows[0]).zip(rows[1]) {
            let t = if r0 { op0.apply2(acc, x0) } else { op0.apply2(x0, acc) };
            acc = if r1 { op1.apply2(x1, t) } else { op1.apply2(t, x1) };
            *o = acc;
        }
    })
}
