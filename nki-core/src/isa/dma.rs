//! DMA: `dma_copy` (with dtype cast) and `dma_transpose`.

pub mod transpose_rules;

use super::enums::{DgeMode, Engine, OobMode};
use crate::emulator::Ctx;
use crate::tensor::{Layout, Reach, give_back};
use crate::{Buffer, ErrorKind, NkiError, Result, Tensor};
use transpose_rules::{Axes, Dge, Dim, TransposeCall, TransposeRule};

/// Optional arguments of [`dma_copy`].
#[nki_macros::spec_options]
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
/// dtypes differ. HBM and SBUF only; PSUM is not reachable by DMA. Either side
/// may be an `.ap(vector_offset=)` view (a gather or a scatter of rows); with
/// `oob_mode=skip` its rows outside the tensor are left out instead of failing.
pub fn dma_copy(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: DmaCopyOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.dma_copy";
    ctx.begin_op(OP)?;
    no_psum(OP, "src", src)?;
    no_psum(OP, "dst", dst)?;
    let indirect = src.is_indirect() || dst.is_indirect();
    if !indirect {
        src.check_bounds(OP)?;
        dst.check_bounds(OP)?;
    }
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
    if !indirect {
        ctx.record(OP, crate::profile::Unit::Dma, &[src], &[dst])?;
        dst.copy_cells_from(src, ctx.rounds());
        return Ok(());
    }
    // An `.ap(vector_offset=)` side resolves its rows now; with oob_mode=skip
    // the rows outside the tensor are not transferred: the cells of a pair with
    // a skipped side are neither read nor written.
    ctx.record_partly(OP, crate::profile::Unit::Dma, (&[], &[src]), (&[], &[dst]))?;
    let skip = opts.oob_mode == Some(OobMode::Skip);
    let (mut from, mut to) = (src.cell_indices(OP, skip)?, dst.cell_indices(OP, skip)?);
    for (f, t) in from.iter_mut().zip(to.iter_mut()) {
        if *f < 0 || *t < 0 {
            (*f, *t) = (-1, -1);
        }
    }
    ctx.check_unwritten_reads(OP, &[(src, Reach::Cells(&from))])?;
    dst.copy_cells_at(&to, src, &from, ctx.rounds());
    dst.mark_reach_written(Reach::Cells(&to));
    Ok(())
}

/// Optional arguments of [`dma_transpose`].
#[nki_macros::spec_options]
#[derive(Clone, Debug, Default)]
pub struct DmaTransposeOpts<'a> {
    /// The permutation: `(1,0)`, `(2,1,0)` or `(3,1,2,0)`; defaults by rank.
    pub axes: Option<Vec<i64>>,
    /// QoS priority; no numeric effect.
    pub priority: Option<i64>,
    /// Descriptor generation mode: unknown (the default) or hwdge, which adds
    /// shape and dtype limits (see [`transpose_rules`]).
    pub dge_mode: Option<DgeMode>,
    /// Out-of-bounds handling; `skip` needs an indirect source.
    pub oob_mode: Option<OobMode>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// The error of a broken [`TransposeRule`]: the op, the operand, its values and the rule.
fn transpose_error(rule: TransposeRule, values: &str) -> NkiError {
    let kind = match rule {
        TransposeRule::SameDtype | TransposeRule::HwdgeDtype => ErrorKind::Dtype,
        TransposeRule::DgeMode | TransposeRule::OobSkip | TransposeRule::HwdgeGeneration => ErrorKind::Constraint,
        TransposeRule::Rank | TransposeRule::Axes | TransposeRule::DstShape | TransposeRule::HwdgeOuterDim | TransposeRule::HwdgeRows => {
            ErrorKind::Shape
        }
    };
    NkiError::new(kind, format!("{}: {values}; {}", rule.operand(), rule.message())).in_op("nisa.dma_transpose")
}

/// `nisa.dma_transpose(dst, src, axes)`: `dst[i_0..i_n] = src[j]` with
/// `j[axes[t]] = i_t`; `dst` in SBUF, `src` in HBM or SBUF, and every rule of
/// [`transpose_rules`] (dtypes, permutation, dst shape, DGE mode and its limits).
pub fn dma_transpose(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: DmaTransposeOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.dma_transpose";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, crate::profile::Unit::Dma, &[src], &[dst])?;
    if dst.buffer() != Buffer::Sbuf {
        return Err(NkiError::constraint(OP, format!("dst {} must be in SBUF", dst.describe())));
    }
    no_psum(OP, "src", src)?;
    src.check_bounds(OP)?;
    dst.check_bounds(OP)?;
    let dims = |t: &Tensor| -> Vec<Dim> { t.shape().iter().map(|&d| Some(d as i64)).collect() };
    let (src_shape, dst_shape) = (dims(src), dims(dst));
    let given: Option<Vec<Dim>> = opts.axes.as_ref().map(|a| a.iter().map(|&x| Some(x)).collect());
    let call = TransposeCall {
        src_shape: Some(&src_shape),
        dst_shape: Some(&dst_shape),
        src_dtype: Some(src.dtype().nl_name()),
        dst_dtype: Some(dst.dtype().nl_name()),
        element_bytes: Some(src.dtype().size_bytes() as i64),
        axes: given.as_deref().map_or(Axes::Default, Axes::Given),
        dge: Some(match opts.dge_mode.unwrap_or_default() {
            DgeMode::Unknown => Dge::Unknown,
            DgeMode::Swdge => Dge::Swdge,
            DgeMode::Hwdge => Dge::Hwdge,
            DgeMode::None => Dge::None,
        }),
        oob_skip: Some(opts.oob_mode == Some(OobMode::Skip)),
        has_hwdge: ctx.hw().has_hwdge,
        target: &ctx.generation().to_string(),
    };
    if let Some((rule, values)) = call.violations().into_iter().next() {
        return Err(transpose_error(rule, &values));
    }
    ctx.validated()?;
    // The rules above make `axes` (given or by rank) a valid permutation of src's dims.
    let axes: Vec<usize> =
        opts.axes.as_deref().or(transpose_rules::permutation_of_rank(src.ndim())).unwrap_or_default().iter().map(|&x| x as usize).collect();
    // Read src through a permuted view so the cells come out in dst's logical order.
    let sl = src.layout();
    let permuted = Layout { offset: sl.offset, shape: dst.shape().to_vec(), strides: axes.iter().map(|&a| sl.strides[a]).collect() };
    // A transpose into a tile of the same dtype in another allocation goes
    // straight into its cells (nothing to convert).
    if dst.dtype() == src.dtype() && !dst.same_storage(src) && permuted.transpose_into(&src.read(), dst.layout(), &mut dst.write()) {
        dst.mark_written();
        return Ok(());
    }
    let mut cells = crate::tensor::take(permuted.numel());
    permuted.gather(&src.read(), &mut cells);
    dst.store_cells(src.dtype(), &mut cells, ctx.rounds());
    give_back(cells);
    Ok(())
}
