//! `nisa.dma_compute`: the DMA engines sum several source tensors element by
//! element into `dst`, in float32, rounding once into `dst`'s dtype.
//!
//! The docs allow only `reduce_op = nl.add` and unit `scales` today; both are
//! checked rather than assumed. Either side may be an `.ap(vector_offset=)`
//! view (the gather and scatter read-modify-write forms); every index is
//! resolved before any cell is written, since `dst` may also be a source.

use super::enums::OobMode;
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::profile::Unit;
use crate::tensor::Reach;
use crate::{Buffer, NkiError, Result, Tensor};
use nki_spec::constants::DMA_COMPUTE_MAX_SRCS;

/// Optional arguments of [`dma_compute`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct DmaComputeOpts<'a> {
    /// One scale per source; the docs allow only 1.0 (the default).
    pub scales: Option<&'a [f64]>,
    /// Whether scatter indices are unique (the default); `false` is refused.
    pub unique_indices: Option<bool>,
    /// Out-of-bounds handling for indirect views: `skip` leaves such rows out.
    pub oob_mode: Option<OobMode>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.dma_compute(dst, srcs, reduce_op)`: `dst = srcs[0] + srcs[1] + ...`,
/// element by element in row-major order, summed in float32 in list order.
/// Every tensor holds `dst`'s element count; none is in PSUM.
pub fn dma_compute(ctx: &Ctx, dst: &Tensor, srcs: &[Tensor], reduce_op: NlOp, opts: DmaComputeOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.dma_compute";
    ctx.begin_op(OP)?;
    // Only the cells of the pairs it transfers are read and written (see below).
    let reads: Vec<&Tensor> = srcs.iter().collect();
    ctx.record_partly(OP, Unit::of_spec(OP), (&[], &reads), (&[], &[dst]))?;
    if reduce_op != NlOp::Add {
        return Err(NkiError::constraint(OP, format!("reduce_op must be nl.add (the only one the DMA engines support), got {reduce_op}")));
    }
    if srcs.is_empty() || srcs.len() > DMA_COMPUTE_MAX_SRCS {
        return Err(NkiError::constraint(OP, format!("srcs holds {} tensors; it must hold 1 to {DMA_COMPUTE_MAX_SRCS}", srcs.len())));
    }
    if let Some(scales) = opts.scales
        && (scales.len() != srcs.len() || scales.iter().any(|&s| s != 1.0))
    {
        return Err(NkiError::constraint(OP, format!("scales must be one 1.0 per source ({} sources), got {scales:?}", srcs.len())));
    }
    if opts.unique_indices == Some(false) {
        return Err(NkiError::constraint(OP, "unique_indices=False (repeated scatter indices) is not supported".to_string()));
    }
    for (role, t) in std::iter::once(("dst".to_string(), dst)).chain(srcs.iter().enumerate().map(|(i, s)| (format!("srcs[{i}]"), s))) {
        if t.buffer() == Buffer::Psum {
            return Err(NkiError::constraint(OP, format!("{role} {} is in PSUM, which DMA cannot access", t.describe())));
        }
        if t.numel() != dst.numel() {
            return Err(NkiError::shape(
                OP,
                format!(
                    "{role} {} has {} elements but dst {} has {}; they must match",
                    t.describe(),
                    t.numel(),
                    dst.describe(),
                    dst.numel()
                ),
            ));
        }
    }
    let skip = opts.oob_mode == Some(OobMode::Skip);
    let to = dst.cell_indices(OP, skip)?;
    let from = srcs.iter().map(|s| s.cell_indices(OP, skip)).collect::<Result<Vec<_>>>()?;
    // A position skipped on any side is not transferred.
    let keep: Vec<bool> = (0..to.len()).map(|k| to[k] >= 0 && from.iter().all(|f| f[k] >= 0)).collect();
    let kept = |cells: &[isize]| -> Vec<isize> { cells.iter().zip(&keep).map(|(&c, &k)| if k { c } else { -1 }).collect() };
    let read: Vec<Vec<isize>> = from.iter().map(|f| kept(f)).collect();
    let checked: Vec<(&Tensor, Reach)> = srcs.iter().zip(&read).map(|(s, r)| (s, Reach::Cells(r))).collect();
    ctx.check_unwritten_reads(OP, &checked)?;
    let mut total: Vec<f32> = Vec::new();
    for (s, idx) in srcs.iter().zip(&from) {
        let values = s.values_at(idx, &keep);
        if total.is_empty() {
            total = values;
        } else {
            total.iter_mut().zip(values).for_each(|(t, v)| *t += v);
        }
    }
    let cells: Vec<isize> = to.iter().zip(&keep).filter(|&(_, &k)| k).map(|(&c, _)| c).collect();
    dst.store_values_at(&cells, total, ctx.rounds());
    dst.mark_reach_written(Reach::Cells(&cells));
    Ok(())
}
