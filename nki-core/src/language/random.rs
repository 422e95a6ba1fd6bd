//! `nl.rand`, `nl.random_seed` and `nl.dropout`: the Vector engine's random
//! generators (see `nisa.rng`) behind tile-level functions.

use super::tiles::FillOpts;
use super::{NdarrayOpts, ndarray};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, Operand};
use crate::profile::Unit;
use crate::{Buffer, Dtype, Result, Tensor};

/// `nl.rand(shape, dtype)`: a new tensor of uniform values in [0, 1) rounded to
/// `dtype`; row `p` of an on-chip tensor draws from Vector lane `p`, an HBM
/// tensor its elements in order from lane 0.
pub fn rand(ctx: &Ctx, shape: &[i64], dtype: Dtype, opts: FillOpts<'_>) -> Result<Tensor> {
    const OP: &str = "nl.rand";
    let t = ndarray(ctx, shape, dtype, NdarrayOpts { buffer: opts.buffer, name: opts.name, ..Default::default() })?;
    ctx.begin_op(OP)?;
    ctx.record(OP, Unit::Vector, &[], &[&t])?;
    nisa::fill_uniform(ctx, OP, &t)?;
    Ok(t)
}

/// `nl.random_seed(seed)`: reseeds the Vector generators from the bit pattern of
/// `seed`, a `[1, 1]` SBUF or PSUM tensor of a 32-bit dtype.
pub fn random_seed(ctx: &Ctx, seed: &Tensor) -> Result<()> {
    const OP: &str = "nl.random_seed";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, Unit::Vector, &[seed], &[])?;
    nisa::seed_vector_from(ctx, OP, "seed", seed)
}

/// `nl.dropout(x, rate, dtype=None)`: a new SBUF tile of `x`'s shape in `dtype`
/// (default `x`'s), holding `x` with each element zeroed where its Vector draw is
/// below `rate` (a number or a `(P, 1)` column); no rescaling.
pub fn dropout(ctx: &Ctx, x: &Tensor, rate: Operand<'_>, dtype: Option<Dtype>) -> Result<Tensor> {
    const OP: &str = "nl.dropout";
    let shape: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
    let out = ndarray(ctx, &shape, dtype.unwrap_or(x.dtype()), NdarrayOpts { buffer: Some(Buffer::Sbuf), ..Default::default() })?;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, Unit::Vector, &[x], &[&out])?;
    nisa::dropout_into(ctx, OP, ("x", x), ("result", &out), ("rate", rate))?;
    Ok(out)
}
