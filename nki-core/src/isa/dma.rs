//! DMA: `dma_copy` (with dtype cast) and `dma_transpose`.

use super::enums::{DgeMode, Engine, OobMode};
use super::exec::mark_written;
use crate::emulator::Ctx;
use crate::tensor::{Layout, give_back};
use crate::{Buffer, NkiError, Result, Tensor};

/// Optional arguments of [`dma_copy`].
#[derive(Clone, Copy, Debug, Default)]
pub struct DmaCopyOpts<'a> {
    /// QoS priority 0–3 (NC-v4); no numeric effect.
    pub priority: Option<i64>,
    /// Out-of-bounds handling for dynamic addresses.
    pub oob_mode: Option<OobMode>,
    /// Descriptor generation mode; `hwdge` moves raw bytes and needs equal dtypes.
    pub dge_mode: Option<DgeMode>,
    /// Engine that triggers a hardware DGE.
    pub engine: Option<Engine>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

fn no_psum(op: &str, role: &str, t: &Tensor) -> Result<()> {
    if t.buffer() == Buffer::Psum {
        return Err(NkiError::constraint(
            op,
            format!("{role} {} is in PSUM, which DMA cannot access; move PSUM data to SBUF with nisa.tensor_copy first", t.describe()),
        ));
    }
    Ok(())
}

/// `nisa.dma_copy(dst, src)`: copies `src` into `dst` element by element (equal
/// element counts, paired in row-major order), casting through fp32 when the
/// dtypes differ. HBM and SBUF only; PSUM is not reachable by DMA.
pub fn dma_copy(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: DmaCopyOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.dma_copy";
    ctx.begin_op(OP)?;
    no_psum(OP, "src", src)?;
    no_psum(OP, "dst", dst)?;
    src.check_bounds(OP)?;
    dst.check_bounds(OP)?;
    if src.numel() != dst.numel() {
        return Err(NkiError::shape(
            OP,
            format!("src {} has {} elements but dst {} has {}; they must match", src.describe(), src.numel(), dst.describe(), dst.numel()),
        ));
    }
    if opts.dge_mode == Some(DgeMode::Hwdge) && src.dtype() != dst.dtype() {
        return Err(NkiError::dtype(
            OP,
            format!(
                "dge_mode=hwdge moves raw bytes and cannot cast {} to {}; use equal dtypes or another DGE mode",
                src.dtype(),
                dst.dtype()
            ),
        ));
    }
    dst.copy_cells_from(src, ctx.rounds());
    mark_written(dst);
    Ok(())
}

/// Optional arguments of [`dma_transpose`].
#[derive(Clone, Debug, Default)]
pub struct DmaTransposeOpts<'a> {
    /// The permutation: `(1,0)`, `(2,1,0)` or `(3,1,2,0)`; defaults by rank.
    pub axes: Option<Vec<i64>>,
    /// QoS priority; no numeric effect.
    pub priority: Option<i64>,
    /// Descriptor generation mode.
    pub dge_mode: Option<DgeMode>,
    /// Out-of-bounds handling.
    pub oob_mode: Option<OobMode>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.dma_transpose(dst, src, axes)`: `dst[i_0..i_n] = src[j]` with
/// `j[axes[t]] = i_t`; `dst` in SBUF, `src` in HBM or SBUF, equal dtypes, and
/// `dst.shape` equal to the permuted `src.shape`.
pub fn dma_transpose(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: DmaTransposeOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.dma_transpose";
    ctx.begin_op(OP)?;
    if dst.buffer() != Buffer::Sbuf {
        return Err(NkiError::constraint(OP, format!("dst {} must be in SBUF", dst.describe())));
    }
    no_psum(OP, "src", src)?;
    if src.dtype() != dst.dtype() {
        return Err(NkiError::dtype(OP, format!("src is {} but dst is {}; dma_transpose does not cast", src.dtype(), dst.dtype())));
    }
    src.check_bounds(OP)?;
    dst.check_bounds(OP)?;
    let n = src.ndim();
    let axes: Vec<usize> = match &opts.axes {
        Some(a) => a.iter().map(|&x| x as usize).collect(),
        None => match n {
            2 => vec![1, 0],
            3 => vec![2, 1, 0],
            4 => vec![3, 1, 2, 0],
            _ => {
                return Err(NkiError::shape(OP, format!("src {} must be 2-, 3- or 4-d", src.describe())));
            }
        },
    };
    if !matches!(axes.as_slice(), [1, 0] | [2, 1, 0] | [3, 1, 2, 0]) || axes.len() != n {
        return Err(NkiError::shape(
            OP,
            format!("axes {axes:?} are not a supported permutation of a {n}-d src (use (1,0), (2,1,0) or (3,1,2,0))"),
        ));
    }
    let want: Vec<usize> = axes.iter().map(|&a| src.shape()[a]).collect();
    if dst.shape() != want.as_slice() {
        return Err(NkiError::shape(
            OP,
            format!("dst {} must have shape {want:?}: src shape {:?} permuted by axes {axes:?}", dst.describe(), src.shape()),
        ));
    }
    // Read src through a permuted view so the cells come out in dst's logical order.
    let sl = src.layout();
    let permuted = Layout { offset: sl.offset, shape: want, strides: axes.iter().map(|&a| sl.strides[a]).collect() };
    let mut cells = crate::tensor::take(permuted.numel());
    permuted.gather(&src.read(), &mut cells);
    dst.store_cells(src.dtype(), &mut cells, ctx.rounds());
    give_back(cells);
    mark_written(dst);
    Ok(())
}
