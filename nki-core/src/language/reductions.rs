//! Reductions of a tile over its trailing free axes: `nl.sum`, `nl.max`,
//! `nl.min`, `nl.prod` and `nl.mean`. Each is the `nisa.tensor_reduce` NKI lowers
//! it to (float32 folds on the Vector engine, rounded once into the result);
//! `mean` reduces into a float32 tile and divides by the count with
//! `nisa.tensor_scalar` into the result's dtype.

use super::{NdarrayOpts, NlOp, ndarray};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, Operand, TensorReduceOpts, TensorScalarOpts};
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// The reduced axes (sorted, non-negative) when they are the trailing free dims of `x`.
fn trailing_axes(py: &str, x: &Tensor, axis: &[i64]) -> Result<Vec<usize>> {
    let nd = x.shape().len() as i64;
    let mut axes: Vec<i64> = axis.iter().map(|&a| if a < 0 { a + nd } else { a }).collect();
    axes.sort_unstable();
    let trailing = axes.first().is_some_and(|&a| a >= 1) && axes.windows(2).all(|w| w[1] == w[0] + 1) && axes.last() == Some(&(nd - 1));
    if !trailing {
        return Err(NkiError::constraint(
            py,
            format!(
                "axis {axis:?} of x {} must name the last free dims, ending at dim {} (the partition dim 0 cannot be reduced)",
                x.describe(),
                nd - 1
            ),
        ));
    }
    Ok(axes.into_iter().map(|a| a as usize).collect())
}

/// What a reduction computes per row.
#[derive(Clone, Copy)]
enum Fold {
    /// `op` over the elements.
    Op(NlOp),
    /// Their float32 sum divided by their count.
    Mean,
}

/// `fold` over `axis` of `x` into a new SBUF tile.
fn reduce(ctx: &Ctx, py: &str, fold: Fold, x: &Tensor, axis: &[i64], dtype: Option<Dtype>, keepdims: Option<bool>) -> Result<Tensor> {
    if !x.buffer().is_on_chip() {
        return Err(NkiError::constraint(
            py,
            format!("x {} must be in SBUF or PSUM: compute engines cannot access HBM (nl.load it first)", x.describe()),
        ));
    }
    let axes = trailing_axes(py, x, axis)?;
    let keep = keepdims.unwrap_or(false);
    let kept: Vec<i64> =
        x.shape().iter().enumerate().filter_map(|(d, &n)| if !axes.contains(&d) { Some(n as i64) } else { keep.then_some(1) }).collect();
    let out = dtype.unwrap_or(x.dtype());
    let alloc = |dtype| ndarray(ctx, &kept, dtype, NdarrayOpts { buffer: Some(Buffer::Sbuf), name: Some(&py[3..]), ..Default::default() });
    if let Fold::Op(op) = fold {
        let dst = alloc(out)?;
        nisa::tensor_reduce(ctx, &dst, op, x, axis, TensorReduceOpts::default())?;
        return Ok(dst);
    }
    let sum = alloc(Dtype::F32)?;
    nisa::tensor_reduce(ctx, &sum, NlOp::Add, x, axis, TensorReduceOpts::default())?;
    let count: usize = axes.iter().map(|&a| x.shape()[a]).product();
    let dst = alloc(out)?;
    nisa::tensor_scalar(ctx, &dst, &sum, NlOp::Divide, Operand::Scalar(count as f64), TensorScalarOpts::default())?;
    Ok(dst)
}

macro_rules! reductions {
    ($($name:ident => $fold:expr, $what:literal);* $(;)?) => {$(
        #[doc = concat!("`nl.", stringify!($name), "(x, axis, dtype=None, keepdims=False)`: the ", $what, " of `x` over its trailing free `axis` dims, in a new SBUF tile of `dtype` (default `x`'s).")]
        pub fn $name(ctx: &Ctx, x: &Tensor, axis: &[i64], dtype: Option<Dtype>, keepdims: Option<bool>) -> Result<Tensor> {
            reduce(ctx, concat!("nl.", stringify!($name)), $fold, x, axis, dtype, keepdims)
        }
    )*};
}

reductions! {
    sum => Fold::Op(NlOp::Add), "sum";
    max => Fold::Op(NlOp::Maximum), "maximum";
    min => Fold::Op(NlOp::Minimum), "minimum";
    prod => Fold::Op(NlOp::Multiply), "product";
    mean => Fold::Mean, "mean";
}
