//! Reductions of a tile over its trailing free axes: `nl.sum`, `nl.max`,
//! `nl.min`, `nl.prod`, `nl.mean` and `nl.all`. Each is the `nisa.tensor_reduce`
//! NKI lowers it to (float32 folds on the Vector engine, rounded once into the
//! result); `mean` reduces into a float32 tile and divides by the count with
//! `nisa.tensor_scalar` into the result's dtype, `all` takes the minimum of the
//! `x != 0` flags.
//!
//! The normalisations built on them, `nl.var`, `nl.softmax` and `nl.rms_norm`,
//! reduce over every free dim of their tile (the per-partition statistic is then
//! a `(P, 1)` column that `nisa.tensor_scalar` broadcasts back) and keep every
//! intermediate in float32, rounding once into the result.

use super::elementwise::binary;
use super::{NdarrayOpts, NlOp, ndarray, new_tile, on_chip};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, ActivationOpts, EngineOpts, Operand, TensorReduceOpts, TensorScalarOpts};
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
    /// 1 when every element is nonzero, else 0.
    All,
}

/// `fold` over `axis` of `x` into a new SBUF tile.
fn reduce(ctx: &Ctx, py: &str, fold: Fold, x: &Tensor, axis: &[i64], dtype: Option<Dtype>, keepdims: Option<bool>) -> Result<Tensor> {
    on_chip(py, "x", x)?;
    let axes = trailing_axes(py, x, axis)?;
    let keep = keepdims.unwrap_or(false);
    let kept: Vec<i64> =
        x.shape().iter().enumerate().filter_map(|(d, &n)| if !axes.contains(&d) { Some(n as i64) } else { keep.then_some(1) }).collect();
    let out = dtype.unwrap_or(x.dtype());
    let alloc = |dtype| ndarray(ctx, &kept, dtype, NdarrayOpts { buffer: Some(Buffer::Sbuf), var: Some(&py[3..]), ..Default::default() });
    if let Fold::Op(op) = fold {
        let dst = alloc(out)?;
        nisa::tensor_reduce(ctx, &dst, op, x, axis, TensorReduceOpts::default())?;
        return Ok(dst);
    }
    if let Fold::All = fold {
        let flags = f32_tile(ctx, py, x.shape())?;
        nisa::tensor_scalar(ctx, &flags, x, NlOp::NotEqual, Operand::Scalar(0.0), TensorScalarOpts::default())?;
        let dst = alloc(out)?;
        nisa::tensor_reduce(ctx, &dst, NlOp::Minimum, &flags, axis, TensorReduceOpts::default())?;
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

/// A new float32 SBUF tile of `shape` for an intermediate of `py`.
fn f32_tile(ctx: &Ctx, py: &str, shape: &[usize]) -> Result<Tensor> {
    new_tile(ctx, &py[3..], shape, Dtype::F32, Buffer::Sbuf)
}

/// Checks that `axis` names every free dim of the on-chip tile `x` (the
/// normalisations' per-partition statistic is then one column); returns the
/// number of elements each partition reduces.
fn whole_rows(py: &str, x: &Tensor, axis: &[i64]) -> Result<usize> {
    on_chip(py, "x", x)?;
    let axes = trailing_axes(py, x, axis)?;
    if axes.first() != Some(&1) {
        return Err(NkiError::constraint(
            py,
            format!(
                "axis {axis:?} of x {} must name every free dim (1 to {}): nki-rs normalises whole partitions",
                x.describe(),
                x.ndim() - 1
            ),
        ));
    }
    Ok(x.shape()[1..].iter().product())
}

/// The float32 `(P, 1)` column of `op` folded over each partition of `x`.
fn column_fold(ctx: &Ctx, py: &str, op: NlOp, x: &Tensor, axis: &[i64]) -> Result<Tensor> {
    let mut shape = vec![x.shape()[0]];
    shape.extend(std::iter::repeat_n(1, x.ndim() - 1));
    let col = f32_tile(ctx, py, &shape)?;
    nisa::tensor_reduce(ctx, &col, op, x, axis, TensorReduceOpts { keepdims: Some(true), ..Default::default() })?;
    Ok(col)
}

/// `nl.var(x, axis, dtype=None, keepdims=False)`: the population variance (no
/// Bessel correction) of each partition of `x` over its free dims, in a new SBUF
/// tile that keeps the reduced dims as 1s (as documented; `keepdims` has no
/// effect). Two float32 passes: the mean, then the mean squared deviation.
pub fn var(ctx: &Ctx, x: &Tensor, axis: &[i64], dtype: Option<Dtype>, keepdims: Option<bool>) -> Result<Tensor> {
    const PY: &str = "nl.var";
    let _ = keepdims;
    let n = whole_rows(PY, x, axis)?;
    let per_count =
        |t: &Tensor, dst: &Tensor| nisa::tensor_scalar(ctx, dst, t, NlOp::Divide, Operand::Scalar(n as f64), TensorScalarOpts::default());
    let sum = column_fold(ctx, PY, NlOp::Add, x, axis)?;
    let mean = f32_tile(ctx, PY, sum.shape())?;
    per_count(&sum, &mean)?;
    let dev = f32_tile(ctx, PY, x.shape())?;
    nisa::tensor_scalar(ctx, &dev, x, NlOp::Subtract, Operand::Tensor(&mean), TensorScalarOpts::default())?;
    let sq = f32_tile(ctx, PY, x.shape())?;
    nisa::tensor_tensor(ctx, &sq, &dev, &dev, NlOp::Multiply, EngineOpts::default())?;
    let sq_sum = column_fold(ctx, PY, NlOp::Add, &sq, axis)?;
    let dims: Vec<i64> = sum.shape().iter().map(|&d| d as i64).collect();
    let dst = ndarray(
        ctx,
        &dims,
        dtype.unwrap_or(x.dtype()),
        NdarrayOpts { buffer: Some(Buffer::Sbuf), var: Some("var"), ..Default::default() },
    )?;
    per_count(&sq_sum, &dst)?;
    Ok(dst)
}

/// `nl.softmax(x, axis=-1, dtype=None)`: `exp(x - max) / sum(exp(x - max))` over
/// the free dims of each partition, in a new SBUF tile of `dtype` (default `x`'s).
pub fn softmax(ctx: &Ctx, x: &Tensor, axis: Option<&[i64]>, dtype: Option<Dtype>) -> Result<Tensor> {
    const PY: &str = "nl.softmax";
    let axis = axis.unwrap_or(&[-1]);
    whole_rows(PY, x, axis)?;
    let max = column_fold(ctx, PY, NlOp::Maximum, x, axis)?;
    let shifted = f32_tile(ctx, PY, x.shape())?;
    nisa::tensor_scalar(ctx, &shifted, x, NlOp::Subtract, Operand::Tensor(&max), TensorScalarOpts::default())?;
    let e = f32_tile(ctx, PY, x.shape())?;
    nisa::activation(ctx, &e, NlOp::Exp, &shifted, ActivationOpts::default())?;
    let sum = column_fold(ctx, PY, NlOp::Add, &e, axis)?;
    let dims: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
    let dst = ndarray(
        ctx,
        &dims,
        dtype.unwrap_or(x.dtype()),
        NdarrayOpts { buffer: Some(Buffer::Sbuf), var: Some("softmax"), ..Default::default() },
    )?;
    nisa::tensor_scalar(ctx, &dst, &e, NlOp::Divide, Operand::Tensor(&sum), TensorScalarOpts::default())?;
    Ok(dst)
}

/// `nl.rms_norm` defaults.
const RMS_NORM_EPSILON: f64 = 1e-6;

/// `nl.rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None)`:
/// `x / sqrt(sum(x²) / n + epsilon) * w` over the free dims of each partition (`w`
/// of `x`'s shape, a `(P, 1)` column or a `(1, F)` row), in a new SBUF tile of
/// `dtype` (default `x`'s). `n` is the count the sum of squares is divided by.
/// The intermediates are float32, the only `compute_dtype` accepted.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm(
    ctx: &Ctx,
    x: &Tensor,
    w: &Tensor,
    axis: &[i64],
    n: i64,
    epsilon: Option<Operand<'_>>,
    dtype: Option<Dtype>,
    compute_dtype: Option<Dtype>,
) -> Result<Tensor> {
    const PY: &str = "nl.rms_norm";
    if let Some(d) = compute_dtype
        && d != Dtype::F32
    {
        return Err(NkiError::argument(
            "compute_dtype",
            d,
            "nl.rms_norm computes its intermediates in float32: compute_dtype must be nl.float32",
        ));
    }
    whole_rows(PY, x, axis)?;
    if n < 1 {
        return Err(NkiError::constraint(PY, format!("n = {n} must be at least 1 (the sum of squares is divided by it)")));
    }
    let epsilon = match epsilon {
        None => RMS_NORM_EPSILON,
        Some(Operand::Scalar(v)) => v,
        Some(Operand::Tensor(t)) => {
            return Err(NkiError::constraint(PY, format!("epsilon must be a number, not the tile {}", t.describe())));
        }
    };
    let sq = f32_tile(ctx, PY, x.shape())?;
    nisa::tensor_tensor(ctx, &sq, x, x, NlOp::Multiply, EngineOpts::default())?;
    let sum = column_fold(ctx, PY, NlOp::Add, &sq, axis)?;
    let ms = f32_tile(ctx, PY, sum.shape())?;
    let opts = TensorScalarOpts { op1: Some(NlOp::Add), operand1: Some(Operand::Scalar(epsilon)), ..Default::default() };
    nisa::tensor_scalar(ctx, &ms, &sum, NlOp::Divide, Operand::Scalar(n as f64), opts)?;
    let rms = f32_tile(ctx, PY, sum.shape())?;
    nisa::activation(ctx, &rms, NlOp::Sqrt, &ms, ActivationOpts::default())?;
    let normed = f32_tile(ctx, PY, x.shape())?;
    nisa::tensor_scalar(ctx, &normed, x, NlOp::Divide, Operand::Tensor(&rms), TensorScalarOpts::default())?;
    binary(ctx, PY, NlOp::Multiply, Operand::Tensor(&normed), Operand::Tensor(w), Some(dtype.unwrap_or(x.dtype())))
}

reductions! {
    sum => Fold::Op(NlOp::Add), "sum";
    max => Fold::Op(NlOp::Maximum), "maximum";
    min => Fold::Op(NlOp::Minimum), "minimum";
    prod => Fold::Op(NlOp::Multiply), "product";
    mean => Fold::Mean, "mean";
}

/// `nl.all(x, axis, dtype=None)`: 1 where every element of `x` over its trailing
/// free `axis` dims is nonzero, else 0, in a new SBUF tile without those dims of
/// `dtype` (default `x`'s).
pub fn all(ctx: &Ctx, x: &Tensor, axis: &[i64], dtype: Option<Dtype>) -> Result<Tensor> {
    reduce(ctx, "nl.all", Fold::All, x, axis, dtype, None)
}
