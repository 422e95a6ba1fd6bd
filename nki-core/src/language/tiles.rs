//! Tile-level `nki.language` functions that allocate their result: `load`,
//! `zeros`, `ones`, `full`, `zeros_like`, `empty_like`, `shared_identity_matrix`,
//! and `store`. Each is the `nisa` sequence NKI lowers it to (an allocation, then
//! a DMA or a memset; the identity keeps ones where the partition equals the
//! column with `nisa.affine_select`).

use super::{NdarrayOpts, ndarray};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, AffineSelectOpts, DmaCopyOpts, EngineOpts};
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

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

/// Optional arguments of [`zeros_like`] and [`empty_like`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct LikeOpts<'a> {
    /// Element type (default `x`'s).
    pub dtype: Option<Dtype>,
    /// Memory space (default `x`'s).
    pub buffer: Option<Buffer>,
    /// Tensor name.
    pub name: Option<&'a str>,
}

/// The shape of `x` and the fill options `opts` resolve to.
fn like<'a>(x: &Tensor, opts: LikeOpts<'a>) -> (Vec<i64>, Dtype, FillOpts<'a>) {
    let shape = x.shape().iter().map(|&d| d as i64).collect();
    (shape, opts.dtype.unwrap_or(x.dtype()), FillOpts { buffer: Some(opts.buffer.unwrap_or(x.buffer())), name: opts.name })
}

/// `nl.zeros_like(x, dtype=None, buffer=None, name='')`: zeros of `x`'s shape,
/// in `x`'s dtype and memory space unless given.
pub fn zeros_like(ctx: &Ctx, x: &Tensor, opts: LikeOpts<'_>) -> Result<Tensor> {
    let (shape, dtype, fill) = like(x, opts);
    filled(ctx, &shape, 0.0, dtype, fill)
}

/// `nl.empty_like(x, dtype=None, buffer=None, name='')`: an uninitialised tensor
/// of `x`'s shape, in `x`'s dtype and memory space unless given.
pub fn empty_like(ctx: &Ctx, x: &Tensor, opts: LikeOpts<'_>) -> Result<Tensor> {
    let (shape, dtype, fill) = like(x, opts);
    ndarray(ctx, &shape, dtype, NdarrayOpts { buffer: fill.buffer, name: fill.name, ..Default::default() })
}

/// `nl.shared_identity_matrix(n, dtype=nl.uint8, dst=None)`: the `n x n`
/// identity in a new SBUF tile of `dtype`, or written into `dst` (an on-chip
/// `(n, n)` tile, returned).
pub fn shared_identity_matrix(ctx: &Ctx, n: i64, dtype: Option<Dtype>, dst: Option<&Tensor>) -> Result<Tensor> {
    const PY: &str = "nl.shared_identity_matrix";
    let size = usize::try_from(n).ok().filter(|&s| s >= 1).ok_or_else(|| NkiError::shape(PY, format!("n = {n} must be at least 1")))?;
    let out = match dst {
        Some(d) if d.shape() != [size, size] || d.buffer() != Buffer::Sbuf => {
            return Err(NkiError::shape(PY, format!("dst {} must be an SBUF ({n}, {n}) tile", d.describe())));
        }
        Some(d) => d.clone(),
        None => ndarray(
            ctx,
            &[n, n],
            dtype.unwrap_or(Dtype::U8),
            NdarrayOpts { buffer: Some(Buffer::Sbuf), var: Some("identity"), ..Default::default() },
        )?,
    };
    let ones = filled(ctx, &[n, n], 1.0, out.dtype(), FillOpts::default())?;
    // Element (p, j) keeps its one where p - j == 0.
    nisa::affine_select(ctx, &out, &[[-1, n]], 1, &ones, 0.0, AffineSelectOpts::default())?;
    Ok(out)
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
