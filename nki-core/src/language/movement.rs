//! Layout and data-movement tile functions: `nl.expand_dims` (a view),
//! `nl.broadcast_to`, `nl.gather_flattened` and `nl.load_transpose2d`, each the
//! `nisa` sequence NKI lowers it to.
//!
//! - `broadcast_to` copies a stride-0 view of its free unit dims
//!   (`nisa.tensor_copy`); a `(1, F)` tile grows down the partitions on the Tensor
//!   engine (a `(1, P)` row of ones times the row, exact), then is copied out.
//! - `gather_flattened` is `nisa.nc_n_gather` on uint32 indices (other integer
//!   indices are converted with `nisa.tensor_copy` first, negative ones refused).
//! - `load_transpose2d` is `nisa.dma_transpose` from HBM into SBUF, then a
//!   `nisa.tensor_copy` when a different `dtype` is asked for.

use super::elementwise::partition_broadcast;
use super::{new_tile, on_chip};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, DmaTransposeOpts, EngineOpts, NameOpts};
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// `nl.expand_dims(x, axis)`: a view of `x` with a dim of size 1 inserted at
/// `axis` (negative counts from the end of the result); never before the
/// partition dim of an on-chip tile.
pub fn expand_dims(x: &Tensor, axis: &[i64]) -> Result<Tensor> {
    const PY: &str = "nl.expand_dims";
    let &[a] = axis else {
        return Err(NkiError::constraint(PY, format!("axis {axis:?} must be one dim")));
    };
    let nd = x.ndim() as i64;
    let at = if a < 0 { a + nd + 1 } else { a };
    if !(0..=nd).contains(&at) {
        return Err(NkiError::shape(PY, format!("axis {a} is outside 0..={nd} for x {}", x.describe())));
    }
    x.expand_dim(at as usize)
}

/// `nl.broadcast_to(x, shape, dtype=None)`: a new tile of `shape` (the rank of
/// `x`) repeating its unit dims, in `x`'s memory space and `dtype` (default `x`'s);
/// `x` itself when nothing changes.
pub fn broadcast_to(ctx: &Ctx, x: &Tensor, shape: &[i64], dtype: Option<Dtype>) -> Result<Tensor> {
    const PY: &str = "nl.broadcast_to";
    on_chip(PY, "x", x)?;
    let out = dtype.unwrap_or(x.dtype());
    let refuse = || NkiError::shape(PY, format!("x {} does not broadcast to {shape:?}", x.describe()));
    if shape.len() != x.ndim() {
        return Err(NkiError::shape(PY, format!("shape {shape:?} must have the rank of x {}", x.describe())));
    }
    let want: Vec<usize> = shape.iter().map(|&d| usize::try_from(d).map_err(|_| refuse())).collect::<Result<_>>()?;
    if want == x.shape() && out == x.dtype() {
        return Ok(x.clone());
    }
    let mut view = x.clone();
    for (d, (&have, &size)) in x.shape().iter().zip(&want).enumerate().skip(1) {
        if have != size {
            view = if have == 1 { view.broadcast(d, size)? } else { return Err(refuse()) };
        }
    }
    let dst = new_tile(ctx, &PY[3..], &want, out, x.buffer())?;
    if want[0] == x.shape()[0] {
        nisa::tensor_copy(ctx, &dst, &view, EngineOpts::default())?;
        return Ok(dst);
    }
    if x.shape()[0] != 1 || want.len() != 2 {
        return Err(NkiError::shape(PY, format!("x {} grows down the partitions only as a 2-d (1, F) row (to {shape:?})", x.describe())));
    }
    let row = new_tile(ctx, &PY[3..], &[1, want[1]], x.dtype(), Buffer::Sbuf)?;
    nisa::tensor_copy(ctx, &row, &view, EngineOpts::default())?;
    let wide = partition_broadcast(ctx, &row, want[0])?;
    nisa::tensor_copy(ctx, &dst, &wide, EngineOpts::default())?;
    Ok(dst)
}

/// `nl.gather_flattened(data, indices, axis=0, dtype=None)`: per partition,
/// `out[p, j...] = data[p, flat(indices[p, j...])]` over the partition's free
/// elements in order, in a new SBUF tile of `indices`' shape and `dtype` (default
/// `data`'s). `indices` is an integer SBUF tile with `data`'s partitions; only
/// `axis=0` (gather within each partition) exists.
pub fn gather_flattened(ctx: &Ctx, data: &Tensor, indices: &Tensor, axis: Option<&[i64]>, dtype: Option<Dtype>) -> Result<Tensor> {
    const PY: &str = "nl.gather_flattened";
    if !matches!(axis, None | Some([0])) {
        return Err(NkiError::constraint(
            PY,
            format!("axis {:?}: only 0 (gather within each partition) is supported", axis.unwrap_or(&[])),
        ));
    }
    if indices.dtype().is_float() {
        return Err(NkiError::dtype(PY, format!("indices {} must have an integer dtype", indices.describe())));
    }
    let idx = if indices.dtype() == Dtype::U32 {
        indices.clone()
    } else {
        if let Some(neg) = indices.to_f32_vec().into_iter().find(|&v| v < 0.0) {
            return Err(NkiError::constraint(PY, format!("indices {} holds {neg}; indices must be non-negative", indices.describe())));
        }
        let u = new_tile(ctx, &PY[3..], indices.shape(), Dtype::U32, Buffer::Sbuf)?;
        nisa::tensor_copy(ctx, &u, indices, EngineOpts::default())?;
        u
    };
    let gathered = new_tile(ctx, &PY[3..], indices.shape(), data.dtype(), Buffer::Sbuf)?;
    nisa::nc_n_gather(ctx, &gathered, data, &idx, NameOpts::default())?;
    match dtype {
        Some(d) if d != data.dtype() => {
            let dst = new_tile(ctx, &PY[3..], indices.shape(), d, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &dst, &gathered, EngineOpts::default())?;
            Ok(dst)
        }
        _ => Ok(gathered),
    }
}

/// `nl.load_transpose2d(src, dtype=None)`: a new SBUF tile holding the 2-d HBM
/// tensor `src` transposed, in `dtype` (default `src`'s).
pub fn load_transpose2d(ctx: &Ctx, src: &Tensor, dtype: Option<Dtype>) -> Result<Tensor> {
    const PY: &str = "nl.load_transpose2d";
    if src.buffer().is_on_chip() || src.ndim() != 2 {
        return Err(NkiError::constraint(PY, format!("src {} must be a 2-d HBM tensor", src.describe())));
    }
    let shape = [src.shape()[1], src.shape()[0]];
    let t = new_tile(ctx, &PY[3..], &shape, src.dtype(), Buffer::Sbuf)?;
    nisa::dma_transpose(ctx, &t, src, DmaTransposeOpts::default())?;
    match dtype {
        Some(d) if d != src.dtype() => {
            let dst = new_tile(ctx, &PY[3..], &shape, d, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &dst, &t, EngineOpts::default())?;
            Ok(dst)
        }
        _ => Ok(t),
    }
}
