//! Tile-level `nki.language` functions that allocate their result: `load`,
//! `zeros`, `ones`, `full`, and `store`. Each is the `nisa` sequence NKI
//! lowers it to (an allocation, then a DMA or a memset).

use super::{NdarrayOpts, ndarray};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, DmaCopyOpts, EngineOpts};
use crate::{Buffer, Dtype, Result, Tensor};

/// Optional arguments of [`zeros`], [`ones`] and [`full`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct FillOpts<'a> {
    /// Memory space (default `nl.sbuf`).
    pub buffer: Option<Buffer>,
    /// Tensor name.
    pub name: Option<&'a str>,
}

/// A new tensor holding `value` everywhere: `memset` on chip, a host-side fill in HBM.
fn filled(ctx: &Ctx, shape: &[i64], value: f64, dtype: Dtype, opts: FillOpts<'_>) -> Result<Tensor> {
    let t = ndarray(ctx, shape, dtype, NdarrayOpts { buffer: opts.buffer, name: opts.name, ..Default::default() })?;
    if t.buffer().is_on_chip() {
        nisa::memset(ctx, &t, value, EngineOpts::default())?;
    } else {
        t.fill_value(value as f32, ctx.rounds());
    }
    Ok(t)
}

/// `nl.zeros(shape, dtype)`: a new tensor of zeros.
pub fn zeros(ctx: &Ctx, shape: &[i64], dtype: Dtype, opts: FillOpts<'_>) -> Result<Tensor> {
    filled(ctx, shape, 0.0, dtype, opts)
}

/// `nl.ones(shape, dtype)`: a new tensor of ones.
pub fn ones(ctx: &Ctx, shape: &[i64], dtype: Dtype, opts: FillOpts<'_>) -> Result<Tensor> {
    filled(ctx, shape, 1.0, dtype, opts)
}

/// `nl.full(shape, fill_value, dtype)`: a new tensor holding `fill_value`.
pub fn full(ctx: &Ctx, shape: &[i64], fill_value: f64, dtype: Dtype, opts: FillOpts<'_>) -> Result<Tensor> {
    filled(ctx, shape, fill_value, dtype, opts)
}

/// `nl.load(src, dtype=None)`: a new SBUF tile of `src`'s shape (dim 0 the
/// partitions) holding `src`, cast to `dtype` when given.
pub fn load(ctx: &Ctx, src: &Tensor, dtype: Option<Dtype>) -> Result<Tensor> {
    let shape: Vec<i64> = src.shape().iter().map(|&d| d as i64).collect();
    let t = ndarray(ctx, &shape, dtype.unwrap_or(src.dtype()), NdarrayOpts { buffer: Some(Buffer::Sbuf), ..Default::default() })?;
    nisa::dma_copy(ctx, &t, src, DmaCopyOpts::default())?;
    Ok(t)
}

/// `nl.store(dst, value)`: copies the tile `value` into `dst` (a DMA).
pub fn store(ctx: &Ctx, dst: &Tensor, value: &Tensor) -> Result<()> {
    nisa::dma_copy(ctx, dst, value, DmaCopyOpts::default())
}
