//! The NKI library's `layernorm_tkg`: LayerNorm of decode-phase hidden states
//! `[B, S, H]`, written in the transposed `[128, B·S, H/128]` layout the
//! sharded projections after it read.
//!
//! Each token row `x` of `H` values becomes `(x - μ) · gamma / sqrt(σ² + eps)
//! (+ beta)`, with `μ` the row's mean and `σ² = E[x²] - μ²` its (biased)
//! variance. The output holds the row in the layout of
//! [`norm_tkg_utils`](super::norm_tkg_utils) with one hidden shard per LNC
//! program (`nl.num_programs(0)`, 1 without a grid).
//!
//! ```text
//! (shard_on_bxs, the default) each program takes BxS/2 rows when the launch
//!     has two programs and BxS > SHARDING_THRESHOLD (and even), else all rows
//! (shard_on_h) each of the two programs takes half of H and all rows
//! gamma, beta -> [128, 1, H1]      # the output's layout, their dtype
//! for each tile of up to BXS_FULL_TILE_SIZE rows:       (process_layernorm_tile)
//!     t   = load rows in the layout [128, rows, H1]     # input dtype
//!     s   = [Σ_H1 t², Σ_H1 t]       [128, 2·rows]       # fp32, per partition
//!     (shard_on_h) s += the other program's s           # one sendrecv
//!     E   = (1/H)[128,128]ᵀ @ s     E[x²], μ on each partition (PSUM)
//!     t   = t - μ                                       # input dtype
//!     r   = rsqrt(E[x²] - μ² + eps)                     # fp32
//!     t   = t · gamma;  t = t · r;  (t = t + beta)      # input dtype, in turn
//!     store t
//! ```
//!
//! As in the library the centred, scaled and shifted rows are held in the
//! input's dtype between the steps (each step rounds); the sums, moments and
//! `r` are fp32. The row tiles are at most `BXS_FULL_TILE_SIZE` rows
//! because each moment is one matmul over the `[128, rows]` partial sums.
//!
//! The kernel takes the library's signature, `input, gamma, output, beta=None,
//! eps=1e-6, shard_on_h=False, use_heap_memory=False`, writes `output` (an
//! HBM tensor the caller allocates) and returns it; `use_heap_memory` chooses
//! the library's SBUF allocator's heap or stack and has no effect here (tiles
//! are placed by the compiler), and the library's `sbm` allocator has no
//! counterpart. The rules are
//! [`norm_tkg_violation`](super::norm_tkg_utils::norm_tkg_violation)'s.

use nki::prelude::*;

pub use kernel::*;

/// The kernel, its tile constants and phase helpers.
#[nki_module]
pub mod kernel {
    use crate::subkernels::norm_tkg_utils::validate_shapes;
    use crate::subkernels::norm_tkg_utils::{
        BXS_FULL_TILE_SIZE, INTER_DTYPE, NormTkgPart, PIPE_ID, bxs_part, h_part, load_gamma_to_sbuf, load_input_to_sbuf, splits_rows,
    };
    use nki::prelude::*;

    /// Rows above which a two-program launch splits the rows (below, both
    /// programs normalise every row: the split would not pay for its exchange).
    pub const SHARDING_THRESHOLD: i64 = 10;

    /// Whether the default (`shard_on_bxs`) split gives each of a launch of
    /// `programs` its own `bxs` rows.
    #[nki_helper]
    pub fn layernorm_tkg_splits_rows(bxs: i64, programs: i64) -> bool {
        splits_rows(bxs, programs, SHARDING_THRESHOLD)
    }

    /// The tiles every row tile reads: gamma and beta in the layout, `eps`, and
    /// the `1/H` matrix whose product with partial sums is their mean.
    #[nki_object]
    pub struct LayerNormTkgConsts {
        /// Gamma `[128, 1, H1]` in the output's layout.
        pub gamma: Tensor,
        /// Beta `[128, 1, H1]` (gamma again when there is no beta).
        pub beta: Tensor,
        /// Whether beta was given.
        pub has_beta: bool,
        /// `eps` on every partition `[128, 1]`.
        pub eps: Tensor,
        /// `1/H` everywhere `[128, 128]`: `meanᵀ @ s` is `Σ s / H` on every partition.
        pub mean: Tensor,
    }

    /// The row moments of the first `rows` rows of `t` into PSUM, on every
    /// partition: `E[x²]` into `mean_sq` `[128, rows]`, `μ` into `mean`
    /// `[128, rows, 1]`.
    #[nki_helper]
    pub fn row_moments(part: NormTkgPart, consts: LayerNormTkgConsts, t: Sbuf, rows: i64, mean_sq: Psum, mean: Psum) {
        let (pmax, cols) = (nl::tile_size::pmax, t.shape()[2]);
        let squares = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, cols], INTER_DTYPE, buffer = nl::sbuf);
        nisa::activation(squares[s![.., 0..rows, ..]], nl::square, t[s![.., 0..rows, ..]]);
        // Σx² in columns 0..rows, Σx in rows..2·rows: one exchange carries both.
        let sums = nl::ndarray([pmax, 2 * BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::sbuf);
        nisa::tensor_reduce(sums[s![.., 0..rows]], nl::add, squares[s![.., 0..rows, ..]], 2);
        nisa::tensor_reduce(sums[s![.., rows..2 * rows]], nl::add, t[s![.., 0..rows, ..]], 2);
        if part.shard_on_h {
            let other = 1 - nl::program_id(0);
            let remote = nl::ndarray([pmax, 2 * BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::sbuf);
            nisa::sendrecv(sums[s![.., 0..2 * rows]], remote[s![.., 0..2 * rows]], other, other, PIPE_ID);
            nisa::tensor_tensor(sums[s![.., 0..2 * rows]], sums[s![.., 0..2 * rows]], remote[s![.., 0..2 * rows]], nl::add);
        }
        nisa::nc_matmul(mean_sq[s![.., 0..rows]], consts.mean, sums[s![.., 0..rows]]);
        nisa::nc_matmul(mean.reshape([pmax, BXS_FULL_TILE_SIZE])[s![.., 0..rows]], consts.mean, sums[s![.., rows..2 * rows]]);
    }

    /// LayerNorm of the first `rows` rows of `t` `[128, BXS_FULL_TILE_SIZE,
    /// cols]`, in place: centred by the mean, scaled by gamma and by
    /// `rsqrt(E[x²] - μ² + eps)`, shifted by beta.
    #[nki_helper]
    pub fn process_layernorm_tile(part: NormTkgPart, consts: LayerNormTkgConsts, t: Sbuf, rows: i64) {
        let (pmax, cols) = (nl::tile_size::pmax, t.shape()[2]);
        let mean_sq = nl::ndarray([pmax, BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::psum);
        let mean = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, 1], INTER_DTYPE, buffer = nl::psum);
        row_moments(part, consts, t, rows, mean_sq, mean);
        nisa::tensor_tensor(t[s![.., 0..rows, ..]], t[s![.., 0..rows, ..]], mean[s![.., 0..rows, ..]].broadcast(2, cols), nl::subtract);
        let var = nl::ndarray([pmax, BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::sbuf);
        nisa::activation(var[s![.., 0..rows]], nl::square, mean.reshape([pmax, BXS_FULL_TILE_SIZE])[s![.., 0..rows]]);
        nisa::tensor_tensor(var[s![.., 0..rows]], mean_sq[s![.., 0..rows]], var[s![.., 0..rows]], nl::subtract);
        let rstd = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::activation(rstd.reshape([pmax, BXS_FULL_TILE_SIZE])[s![.., 0..rows]], nl::rsqrt, var[s![.., 0..rows]], bias = consts.eps);
        nisa::tensor_tensor(t[s![.., 0..rows, ..]], t[s![.., 0..rows, ..]], consts.gamma.broadcast(1, rows), nl::multiply);
        nisa::tensor_tensor(t[s![.., 0..rows, ..]], t[s![.., 0..rows, ..]], rstd[s![.., 0..rows, ..]].broadcast(2, cols), nl::multiply);
        if consts.has_beta {
            nisa::tensor_tensor(t[s![.., 0..rows, ..]], t[s![.., 0..rows, ..]], consts.beta.broadcast(1, rows), nl::add);
        }
    }

    /// The part's rows, tile by tile: load, normalise, store into `output`.
    #[nki_helper]
    pub fn layernorm_tkg_impl(part: NormTkgPart, input: Hbm, gamma: Hbm, beta: Option<Hbm>, output: Hbm, eps: f64) {
        let (pmax, h) = (nl::tile_size::pmax, input.shape()[1]);
        let cols = output.shape()[2] / part.shards * part.held;
        let c0 = part.first * cols;
        let eps_sb = nl::ndarray([pmax, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(eps_sb, eps);
        let mean = nl::ndarray([pmax, pmax], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(mean, 1.0 / h as f64);
        let g = load_gamma_to_sbuf(gamma, cols, part.shards, part.first, part.held, false);
        // Without beta, gamma stands in for it (one small load) and is not added.
        let b = load_gamma_to_sbuf(beta.unwrap_or(gamma), cols, part.shards, part.first, part.held, false);
        let consts = LayerNormTkgConsts { gamma: g, beta: b, has_beta: beta.is_some(), eps: eps_sb, mean };
        for i in nl::affine_range(part.rows.div_ceil(BXS_FULL_TILE_SIZE)) {
            let r0 = part.row0 + i * BXS_FULL_TILE_SIZE;
            let rows = (part.row0 + part.rows - r0).min(BXS_FULL_TILE_SIZE);
            let t = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, cols], input.dtype(), buffer = nl::sbuf);
            load_input_to_sbuf(input, t, r0, rows, part.shards, part.first, part.held, false);
            process_layernorm_tile(part, consts, t, rows);
            nisa::dma_copy(output[s![.., r0..r0 + rows, c0..c0 + cols]], t[s![.., 0..rows, ..]]);
        }
    }

    /// The rows split over a two-program launch when there are more than
    /// `SHARDING_THRESHOLD` of them (an even count), each program holding every
    /// hidden shard of the layout.
    #[nki_helper]
    pub fn layernorm_tkg_shard_on_bxs(input: Hbm, gamma: Hbm, beta: Option<Hbm>, output: Hbm, eps: f64) {
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let part = bxs_part(input.shape()[0], programs, SHARDING_THRESHOLD, true, programs, false);
        layernorm_tkg_impl(part, input, gamma, beta, output, eps);
    }

    /// Every row on each of the two programs, the hidden dim split in two:
    /// program `p` holds hidden shard `p` and the partial sums are exchanged.
    #[nki_helper]
    pub fn layernorm_tkg_shard_on_h(input: Hbm, gamma: Hbm, beta: Option<Hbm>, output: Hbm, eps: f64) {
        layernorm_tkg_impl(h_part(input.shape()[0]), input, gamma, beta, output, eps);
    }

    /// LayerNorm of `input` `[B, S, H]` with `gamma` and `beta` `[1, H]` into
    /// `output` `[128, B·S, H/128]` (the layout of the module docs), which it
    /// returns.
    #[nki_kernel]
    pub fn layernorm_tkg(
        #[dtypes(float32, bfloat16, float16)] input: Hbm,
        #[dtypes(float32, bfloat16, float16)] gamma: Hbm,
        #[dtypes(float32, bfloat16, float16)] output: Hbm,
        #[dtypes(float32, bfloat16, float16)] beta: Option<Hbm>,
        #[default(1e-6)] eps: f64,
        #[default(false)] shard_on_h: bool,
        #[default(false)] use_heap_memory: bool,
    ) -> Hbm {
        let _ = use_heap_memory;
        assert!(input.ndim() == 3, "layernorm_tkg: input must be [B, S, H], got {} dims", input.ndim());
        let [b, sl, h] = input.shape();
        let (pmax, bxs) = (nl::tile_size::pmax, b * sl);
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        // The rules of `norm_tkg_violation`, checked when the kernel is traced.
        assert!(h % pmax == 0, "layernorm_tkg: input: H = {h} must be a multiple of 128 (the partitions)");
        assert!(bxs > 0, "layernorm_tkg: input: B * S = {bxs} must be positive");
        assert!(eps >= 0.0 && eps < f64::INFINITY, "layernorm_tkg: eps must be finite and non-negative, got eps = {eps}");
        assert!(!shard_on_h || programs == 2, "layernorm_tkg: shard_on_h needs a launch of 2 programs (LNC2), got {programs}");
        assert!((h / pmax) % programs == 0, "layernorm_tkg: H / 128 = {} must split evenly over the {programs} hidden shards", h / pmax);
        let x = validate_shapes("layernorm_tkg", input, gamma, beta, output);
        if shard_on_h {
            layernorm_tkg_shard_on_h(x, gamma, beta, output, eps);
        } else {
            layernorm_tkg_shard_on_bxs(x, gamma, beta, output, eps);
        }
        output
    }
}
