//! The NKI library's experimental cross-entropy kernels for large vocabularies:
//! `cross_entropy_forward` (per-position loss and log-sum-exp, by the online
//! log-sum-exp) and `cross_entropy_backward` (the gradient with respect to the
//! logits from the saved log-sum-exp).
//!
//! The logits are `[num_positions, V]` (`num_positions = B·T`, flattened by the
//! caller). The positions are split contiguously over the LNC programs, the
//! last taking the remainder; each program walks its positions in batches of
//! `positions_per_batch` (one position per partition) and the vocabulary in
//! chunks of `chunk_size` columns:
//!
//! ```text
//! forward, per batch:
//!     m = -inf, d = 0                                   # [batch, 1] in dtype
//!     for each chunk [c0, c0 + chunk_size):
//!         x     = logits[batch, chunk]                   # dtype
//!         m_new = max(m, max_j x)                        # fp32
//!         d     = d · exp(m - m_new) + Σ_j exp(x - m_new)
//!         m     = m_new
//!     lse  = m + log(d)
//!     loss = lse - logits[p, target[p]]                  # one indirect DMA per position
//!
//! backward, per batch (lse and targets loaded as fp32):
//!     for each chunk:
//!         g = grad_scale · exp(x - lse)                  # grad_scale: 1/num_positions or 1
//!         g -= grad_scale · (iota(c0..c0 + chunk_size) == target)
//!         store g (over the logits when inplace)
//! ```
//!
//! Every intermediate tile is in `dtype` (bfloat16 by default) as in the
//! library, except the running maximum's update (fp32) and, in the backward,
//! the targets, log-sum-exp and index mask (fp32, so vocabulary indices above
//! 256 stay exact). A batch's last chunk and the last batch are processed as
//! the parts the logits fill (the library pads them with `-inf`, which adds
//! exact zeros to the sums and leaves the maxima unchanged: the same values).
//!
//! One instruction (`x - m_new`, `x - lse`) holds two chunk-wide tiles and a
//! column, so a chunk fits a partition's SBUF when `2 × chunk_size × dtype
//! bytes` (plus 4) is within it: 229,376 bytes on trn2, as the library's
//! backward documents, 262,144 on trn3. The library's bf16 chunk of 65,535 runs
//! on trn3 only; its fp32 chunk of 32,768 exceeds trn3 by those 4 bytes.
//!
//! The library's rules ([`validation`](super::validation)): at most 128
//! positions per batch, `chunk_size` within `1..=V` and at most 65,536, one
//! `[positions_per_batch, chunk_size]` tile within 24 MiB; `reduction` is
//! `"mean"` or `"sum"`.

pub use kernel::*;

/// The kernels with their buffers and phase helpers.
#[nki::nki_module]
pub mod kernel {
    use crate::experimental::loss::validation::{validate_cross_entropy_backward_inputs, validate_cross_entropy_forward_inputs};
    use nki::prelude::*;

    /// This program's share of the positions and the batch and chunk counts.
    #[nki_object]
    pub struct PositionShard {
        /// Vocabulary size `V`.
        pub vocab_size: i64,
        /// Positions per batch (the partitions of every batch tile).
        pub positions_per_batch: i64,
        /// Vocabulary columns per chunk.
        pub chunk_size: i64,
        /// Chunks per row, the last possibly partial.
        pub num_chunks: i64,
        /// This program's first position.
        pub shard_offset: i64,
        /// This program's positions.
        pub positions_per_core: i64,
        /// Batches over this program's positions, the last possibly partial.
        pub num_batches: i64,
    }

    /// The forward's SBUF tiles, `[positions_per_batch, ·]`, in `dtype` unless noted.
    #[nki_object]
    pub struct ForwardBuffers {
        /// Target indices, int32.
        pub targets: Tensor,
        /// Running maximum `m`.
        pub m: Tensor,
        /// Running sum `d` of `exp(x - m)`.
        pub d: Tensor,
        /// One chunk of logits, `[.., chunk_size]`.
        pub chunk: Tensor,
        /// The chunk's row maximum.
        pub chunk_max: Tensor,
        /// The updated maximum, fp32.
        pub m_new: Tensor,
        /// `m - m_new`.
        pub m_diff: Tensor,
        /// `exp(m - m_new)`.
        pub correction: Tensor,
        /// `d · exp(m - m_new)`.
        pub d_corrected: Tensor,
        /// `exp(x - m_new)`, `[.., chunk_size]`.
        pub exp_chunk: Tensor,
        /// The chunk's `Σ exp(x - m_new)`.
        pub sum_exp: Tensor,
        /// The updated sum.
        pub d_new: Tensor,
        /// `log(d)`.
        pub log_d: Tensor,
        /// `m + log(d)`.
        pub lse: Tensor,
        /// Each position's logit at its target.
        pub target_logits: Tensor,
        /// `lse - target logit`.
        pub loss: Tensor,
    }

    /// The backward's SBUF tiles, `[positions_per_batch, ·]`.
    #[nki_object]
    pub struct BackwardBuffers {
        /// Target indices as fp32.
        pub targets: Tensor,
        /// The saved log-sum-exp as fp32.
        pub lse: Tensor,
        /// One chunk of logits, `dtype`.
        pub logits_chunk: Tensor,
        /// `exp(x - lse)`, `dtype`.
        pub softmax_chunk: Tensor,
        /// The gradient chunk, `dtype`.
        pub grad_chunk: Tensor,
        /// The chunk's vocabulary indices, then the target mask, fp32.
        pub chunk_indices_and_mask: Tensor,
        /// `mask · grad_scale`, `dtype`.
        pub correction: Tensor,
    }

    /// The positions of this program (the library's contiguous split over
    /// `get_verified_program_sharding_info`, the last program taking the
    /// remainder) and the batch and chunk counts.
    #[nki_helper]
    pub fn shard_positions(num_positions: i64, vocab_size: i64, positions_per_batch: i64, chunk_size: i64) -> PositionShard {
        let grid = nl::program_ndim() == 1;
        let num_cores = if grid { nl::num_programs(0) } else { 1 };
        let core_id = if grid { nl::program_id(0) } else { 0 };
        let nominal_positions_per_core = num_positions / num_cores;
        let shard_offset = core_id * nominal_positions_per_core;
        let positions_per_core = if core_id == num_cores - 1 { num_positions - shard_offset } else { nominal_positions_per_core };
        PositionShard {
            vocab_size,
            positions_per_batch,
            chunk_size,
            num_chunks: vocab_size.div_ceil(chunk_size),
            shard_offset,
            positions_per_core,
            num_batches: positions_per_core.div_ceil(positions_per_batch),
        }
    }

    /// The forward's tiles, allocated once and reused by every batch.
    #[nki_helper]
    fn allocate_forward_buffers(sh: PositionShard, dtype: Dtype) -> ForwardBuffers {
        let (p, cs) = (sh.positions_per_batch, sh.chunk_size);
        ForwardBuffers {
            targets: nl::ndarray([p, 1], nl::int32, buffer = nl::sbuf),
            m: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            d: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            chunk: nl::ndarray([p, cs], dtype, buffer = nl::sbuf),
            chunk_max: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            m_new: nl::ndarray([p, 1], nl::float32, buffer = nl::sbuf),
            m_diff: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            correction: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            d_corrected: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            exp_chunk: nl::ndarray([p, cs], dtype, buffer = nl::sbuf),
            sum_exp: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            d_new: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            log_d: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            lse: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            target_logits: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
            loss: nl::ndarray([p, 1], dtype, buffer = nl::sbuf),
        }
    }

    /// One step of the online log-sum-exp: the chunk `chunk_idx` of the `rows`
    /// positions from `row0` (global) folded into `m` and `d`.
    #[nki_helper]
    fn online_lse_update(sh: PositionShard, b: ForwardBuffers, logits_hbm: Hbm, row0: i64, rows: i64, chunk_idx: i64) {
        let c0 = chunk_idx * sh.chunk_size;
        let cols = (sh.vocab_size - c0).min(sh.chunk_size);
        let chunk = b.chunk[s![0..rows, 0..cols]];
        nisa::dma_copy(chunk, logits_hbm[s![row0..row0 + rows, c0..c0 + cols]]);
        let (m, d, m_new) = (b.m[s![0..rows, ..]], b.d[s![0..rows, ..]], b.m_new[s![0..rows, ..]]);
        let chunk_max = b.chunk_max[s![0..rows, ..]];
        nisa::tensor_reduce(chunk_max, nl::maximum, chunk, 1);
        nisa::tensor_tensor(m_new, m, chunk_max, nl::maximum);
        // The old sum rescaled to the new maximum: d · exp(m - m_new).
        let (m_diff, correction, d_corrected) = (b.m_diff[s![0..rows, ..]], b.correction[s![0..rows, ..]], b.d_corrected[s![0..rows, ..]]);
        nisa::tensor_tensor(m_diff, m, m_new, nl::subtract);
        nisa::activation(correction, nl::exp, m_diff);
        nisa::tensor_tensor(d_corrected, d, correction, nl::multiply);
        // The chunk's own sum at the new maximum.
        let (exp_chunk, sum_exp, d_new) = (b.exp_chunk[s![0..rows, 0..cols]], b.sum_exp[s![0..rows, ..]], b.d_new[s![0..rows, ..]]);
        nisa::tensor_scalar(exp_chunk, chunk, nl::subtract, m_new);
        nisa::activation(exp_chunk, nl::exp, exp_chunk);
        nisa::tensor_reduce(sum_exp, nl::add, exp_chunk, 1);
        nisa::tensor_tensor(d_new, d_corrected, sum_exp, nl::add);
        nisa::tensor_copy(m, m_new);
        nisa::tensor_copy(d, d_new);
    }

    /// Each of the `rows` positions' logit at its target, by one DMA per
    /// position whose column comes from the loaded target (`scalar_offset`).
    #[nki_helper]
    fn load_target_logits(sh: PositionShard, b: ForwardBuffers, logits_hbm: Hbm, row0: i64, rows: i64) {
        let vocab_size = sh.vocab_size;
        for p in 0..rows {
            let row = logits_hbm.ap(
                [[vocab_size, 1], [1, 1]],
                offset = (row0 + p) * vocab_size,
                scalar_offset = b.targets[s![p..p + 1, ..]],
                indirect_dim = 1,
            );
            nisa::dma_copy(b.target_logits[s![p..p + 1, ..]], row);
        }
    }

    /// One batch of the forward: the online log-sum-exp over every chunk, then
    /// `lse` and `loss` stored for the `rows` positions from `batch_start`
    /// (within this program's share).
    #[nki_helper]
    fn cross_entropy_forward_batch(
        sh: PositionShard,
        b: ForwardBuffers,
        logits_hbm: Hbm,
        targets_hbm: Hbm,
        loss_hbm: Hbm,
        lse_state_hbm: Hbm,
        batch_start: i64,
        rows: i64,
    ) {
        let g0 = sh.shard_offset + batch_start;
        nisa::memset(b.m, f64::NEG_INFINITY);
        nisa::memset(b.d, 0.0);
        let n = targets_hbm.shape()[0];
        nisa::dma_copy(b.targets[s![0..rows, ..]], targets_hbm.reshape([n, 1])[s![g0..g0 + rows, ..]]);
        for chunk_idx in 0..sh.num_chunks {
            online_lse_update(sh, b, logits_hbm, g0, rows, chunk_idx);
        }
        let (lse, loss) = (b.lse[s![0..rows, ..]], b.loss[s![0..rows, ..]]);
        nisa::activation(b.log_d[s![0..rows, ..]], nl::log, b.d[s![0..rows, ..]]);
        nisa::tensor_tensor(lse, b.m[s![0..rows, ..]], b.log_d[s![0..rows, ..]], nl::add);
        load_target_logits(sh, b, logits_hbm, g0, rows);
        nisa::tensor_tensor(loss, lse, b.target_logits[s![0..rows, ..]], nl::subtract);
        nisa::dma_copy(lse_state_hbm.reshape([n, 1])[s![g0..g0 + rows, ..]], lse);
        nisa::dma_copy(loss_hbm.reshape([n, 1])[s![g0..g0 + rows, ..]], loss);
    }

    /// Cross-entropy loss of each position and its log-sum-exp, by the online
    /// log-sum-exp over vocabulary chunks (see the module docs).
    ///
    /// `logits_hbm` is `[num_positions, V]` (bfloat16 or float32),
    /// `targets_hbm` `[num_positions]` int32; `positions_per_batch` positions
    /// (at most 128) share each tile, `chunk_size` columns (at most
    /// `min(V, 65536)`) each chunk; `dtype` is the dtype of the intermediates
    /// and the outputs. Returns `(loss_hbm, lse_state_hbm)`, both
    /// `[num_positions]` in `dtype`.
    #[nki_kernel]
    pub fn cross_entropy_forward(
        #[dtypes(bfloat16, float32)] logits_hbm: Hbm,
        #[dtypes(int32)] targets_hbm: Hbm,
        #[default(32)] positions_per_batch: i64,
        #[default(32768)] chunk_size: i64,
        #[default(nl::bfloat16)] dtype: Dtype,
    ) -> (Hbm, Hbm) {
        validate_cross_entropy_forward_inputs(logits_hbm, targets_hbm, positions_per_batch, chunk_size, "cross_entropy_forward");
        let [num_positions, vocab_size] = logits_hbm.shape();
        let sh: PositionShard = shard_positions(num_positions, vocab_size, positions_per_batch, chunk_size);
        let loss_hbm = nl::ndarray([num_positions], dtype, buffer = nl::shared_hbm);
        let lse_state_hbm = nl::ndarray([num_positions], dtype, buffer = nl::shared_hbm);
        let b = allocate_forward_buffers(sh, dtype);
        for batch_idx in 0..sh.num_batches {
            let batch_start = batch_idx * sh.positions_per_batch;
            let rows = (sh.positions_per_core - batch_start).min(sh.positions_per_batch);
            cross_entropy_forward_batch(sh, b, logits_hbm, targets_hbm, loss_hbm, lse_state_hbm, batch_start, rows);
        }
        (loss_hbm, lse_state_hbm)
    }

    /// The backward's tiles, allocated once and reused by every batch.
    #[nki_helper]
    fn allocate_backward_buffers(sh: PositionShard, dtype: Dtype) -> BackwardBuffers {
        let (p, cs) = (sh.positions_per_batch, sh.chunk_size);
        BackwardBuffers {
            targets: nl::ndarray([p, 1], nl::float32, buffer = nl::sbuf),
            lse: nl::ndarray([p, 1], nl::float32, buffer = nl::sbuf),
            logits_chunk: nl::ndarray([p, cs], dtype, buffer = nl::sbuf),
            softmax_chunk: nl::ndarray([p, cs], dtype, buffer = nl::sbuf),
            grad_chunk: nl::ndarray([p, cs], dtype, buffer = nl::sbuf),
            chunk_indices_and_mask: nl::ndarray([p, cs], nl::float32, buffer = nl::sbuf),
            correction: nl::ndarray([p, cs], dtype, buffer = nl::sbuf),
        }
    }

    /// One gradient chunk of the `rows` positions from `row0` (global):
    /// `grad_scale · (exp(x - lse) - [column == target])`, stored to `grad_hbm`.
    #[nki_helper]
    fn compute_grad_chunk(
        sh: PositionShard,
        b: BackwardBuffers,
        logits_hbm: Hbm,
        grad_hbm: Hbm,
        row0: i64,
        rows: i64,
        chunk_idx: i64,
        grad_scale: f64,
    ) {
        let c0 = chunk_idx * sh.chunk_size;
        let cols = (sh.vocab_size - c0).min(sh.chunk_size);
        let x = b.logits_chunk[s![0..rows, 0..cols]];
        nisa::dma_copy(x, logits_hbm[s![row0..row0 + rows, c0..c0 + cols]]);
        let (softmax, grad) = (b.softmax_chunk[s![0..rows, 0..cols]], b.grad_chunk[s![0..rows, 0..cols]]);
        nisa::tensor_scalar(softmax, x, nl::subtract, b.lse[s![0..rows, ..]]);
        nisa::activation(softmax, nl::exp, softmax);
        nisa::tensor_scalar(grad, softmax, nl::multiply, grad_scale);
        // The target's column: the chunk's vocabulary indices compared with
        // each position's target (both fp32, exact for any vocabulary index).
        let mask = b.chunk_indices_and_mask[s![0..rows, 0..cols]];
        nisa::iota(mask, [[1, cols]], offset = c0, channel_multiplier = 0);
        nisa::tensor_scalar(mask, mask, nl::equal, b.targets[s![0..rows, ..]]);
        let correction = b.correction[s![0..rows, 0..cols]];
        nisa::tensor_scalar(correction, mask, nl::multiply, grad_scale);
        nisa::tensor_tensor(grad, grad, correction, nl::subtract);
        nisa::dma_copy(grad_hbm[s![row0..row0 + rows, c0..c0 + cols]], grad);
    }

    /// The gradient of the cross-entropy loss with respect to the logits,
    /// `grad_scale · (softmax(logits) - onehot(target))`, the softmax formed
    /// from the forward's saved log-sum-exp (see the module docs).
    ///
    /// `reduction` is `"mean"` (`grad_scale = 1 / num_positions`) or `"sum"`
    /// (1); `positions_per_batch`, `chunk_size` and `dtype` as in
    /// [`cross_entropy_forward`]. With `inplace` the gradient is written over
    /// `logits_hbm`, which is returned; otherwise into a new
    /// `[num_positions, V]` tensor in `dtype`.
    #[nki_kernel]
    pub fn cross_entropy_backward(
        #[dtypes(bfloat16, float32)] logits_hbm: Hbm,
        #[dtypes(int32)] targets_hbm: Hbm,
        #[dtypes(bfloat16, float32)] lse_state_hbm: Hbm,
        #[default("mean")] reduction: &str,
        #[default(32)] positions_per_batch: i64,
        #[default(32768)] chunk_size: i64,
        #[default(nl::bfloat16)] dtype: Dtype,
        #[default(true)] inplace: bool,
    ) -> Hbm {
        validate_cross_entropy_backward_inputs(logits_hbm, targets_hbm, lse_state_hbm, positions_per_batch, chunk_size, reduction);
        let [num_positions, vocab_size] = logits_hbm.shape();
        let grad_scale = if reduction == "mean" { 1.0 / num_positions as f64 } else { 1.0 };
        let sh: PositionShard = shard_positions(num_positions, vocab_size, positions_per_batch, chunk_size);
        let grad_logits_hbm = if inplace { logits_hbm } else { nl::ndarray([num_positions, vocab_size], dtype, buffer = nl::shared_hbm) };
        let b = allocate_backward_buffers(sh, dtype);
        let targets_col = targets_hbm.reshape([num_positions, 1]);
        let lse_col = lse_state_hbm.reshape([num_positions, 1]);
        for batch_idx in 0..sh.num_batches {
            let batch_start = batch_idx * sh.positions_per_batch;
            let rows = (sh.positions_per_core - batch_start).min(sh.positions_per_batch);
            let g0 = sh.shard_offset + batch_start;
            nisa::dma_copy(b.targets[s![0..rows, ..]], targets_col[s![g0..g0 + rows, ..]]);
            nisa::dma_copy(b.lse[s![0..rows, ..]], lse_col[s![g0..g0 + rows, ..]]);
            for chunk_idx in 0..sh.num_chunks {
                compute_grad_chunk(sh, b, logits_hbm, grad_logits_hbm, g0, rows, chunk_idx, grad_scale);
            }
        }
        grad_logits_hbm
    }
}
