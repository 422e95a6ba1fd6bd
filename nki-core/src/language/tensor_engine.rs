//! `nl.matmul` and `nl.transpose`: Tensor-engine tile functions returning a new
//! PSUM tile, each the `nisa` sequence NKI lowers it to.
//!
//! `nl.transpose(x)` is one PE transpose (`nisa.nc_transpose` of the SBUF tile
//! into PSUM), then a `nisa.tensor_copy` into a PSUM tile of `dtype` when a
//! different dtype is asked for. `nl.matmul(x, y, transpose_x=True)` is one
//! `nisa.nc_matmul` with `x` (K, M) stationary and `y` (K, N) moving; without
//! `transpose_x`, `x` (M, K) is first PE-transposed and copied back to SBUF.

use super::{NdarrayOpts, ndarray};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, EngineOpts, NcMatmulOpts, NcTransposeOpts};
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// A new tile of `shape` in `buffer`.
fn tile(ctx: &Ctx, name: &str, shape: [usize; 2], dtype: Dtype, buffer: Buffer) -> Result<Tensor> {
    ndarray(ctx, &[shape[0] as i64, shape[1] as i64], dtype, NdarrayOpts { buffer: Some(buffer), var: Some(name), ..Default::default() })
}

/// The (partitions, free) of a 2-d SBUF operand of the Tensor engine.
fn operand(py: &str, role: &str, t: &Tensor) -> Result<[usize; 2]> {
    match (t.buffer(), t.shape()) {
        (Buffer::Sbuf, &[p, f]) => Ok([p, f]),
        _ => Err(NkiError::constraint(py, format!("{role} {} must be a 2-d SBUF tile (the Tensor engine reads SBUF)", t.describe()))),
    }
}

/// `x` transposed into a new PSUM tile of its dtype (`nisa.nc_transpose`).
fn pe_transpose(ctx: &Ctx, py: &str, x: &Tensor) -> Result<Tensor> {
    let [p, f] = operand(py, "x", x)?;
    let limit = ctx.hw().pe_transpose_max;
    if p > limit || f > limit {
        return Err(NkiError::constraint(
            py,
            format!("x {} must be at most {limit} x {limit} to transpose on the Tensor engine", x.describe()),
        ));
    }
    let t = tile(ctx, "transpose", [f, p], x.dtype(), Buffer::Psum)?;
    nisa::nc_transpose(ctx, &t, x, NcTransposeOpts::default())?;
    Ok(t)
}

/// `nl.transpose(x, dtype=None)`: a new PSUM tile holding the 2-d SBUF tile `x`
/// (at most 128 x 128) transposed, in `dtype` (default `x`'s).
pub fn transpose(ctx: &Ctx, x: &Tensor, dtype: Option<Dtype>) -> Result<Tensor> {
    let t = pe_transpose(ctx, "nl.transpose", x)?;
    match dtype {
        Some(d) if d != x.dtype() => {
            let cast = tile(ctx, "transpose", [t.shape()[0], t.shape()[1]], d, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &cast, &t, EngineOpts::default())?;
            Ok(cast)
        }
        _ => Ok(t),
    }
}

/// `nl.matmul(x, y, transpose_x=False)`: `x @ y` (or `xᵀ @ y` with
/// `transpose_x`) into a new float32 PSUM tile, contracting over `y`'s partitions.
pub fn matmul(ctx: &Ctx, x: &Tensor, y: &Tensor, transpose_x: Option<bool>) -> Result<Tensor> {
    const PY: &str = "nl.matmul";
    let transpose_x = transpose_x.unwrap_or(false);
    // The operands' shapes are checked before the transpose of `x` runs.
    let ([xp, xf], [ky, n]) = (operand(PY, "x", x)?, operand(PY, "y", y)?);
    let (k, m) = if transpose_x { (xp, xf) } else { (xf, xp) };
    if k != ky {
        let how = if transpose_x { "partitions" } else { "free size" };
        return Err(NkiError::shape(
            PY,
            format!("x {} has {how} {k} but y {} has {ky} partitions: the contraction dims must match", x.describe(), y.describe()),
        ));
    }
    let stationary = if transpose_x {
        x.clone()
    } else {
        let t = pe_transpose(ctx, PY, x)?;
        let s = tile(ctx, "matmul_xT", [t.shape()[0], t.shape()[1]], x.dtype(), Buffer::Sbuf)?;
        nisa::tensor_copy(ctx, &s, &t, EngineOpts::default())?;
        s
    };
    let dst = tile(ctx, "matmul", [m, n], Dtype::F32, Buffer::Psum)?;
    nisa::nc_matmul(ctx, &dst, &stationary, y, NcMatmulOpts { accumulate: Some(false), ..Default::default() })?;
    Ok(dst)
}
