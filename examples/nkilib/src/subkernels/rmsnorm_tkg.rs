//! The NKI library's `rmsnorm_tkg`: RMSNorm of decode-phase hidden states
//! `[B, S, H]`, written in the transposed `[128, B·S, H/128]` layout the
//! sharded projections after it read.
//!
//! Each token row `x` of `H` values becomes `x · gamma / sqrt(Σx² / N + eps)`,
//! `N` being `hidden_actual` when the row is padded and `H` otherwise (the sum
//! runs over all `H` columns: padding is expected to be zeros). The output holds token `t`'s
//! element `h` of the row at `out[p, t, c]` with, for `n` hidden shards
//! (`H2 = H/128/n`), `h = (c / H2)·(H/n) + p·H2 + c % H2`: the hidden dim is cut
//! into `n` contiguous shards, each spread over the 128 partitions in runs of
//! `H2`. `n` is the launch's LNC size (`nl.num_programs(0)`, 1 without a grid)
//! unless `hidden_dim_tp` or `single_core_forced` make it 1; with
//! `hidden_dim_tp` the layout is `h = c·128 + p` instead.
//!
//! ```text
//! (shard_on_bxs, the default) each program takes BxS/2 rows when the launch
//!     has two programs, BxS > SHARDING_THRESHOLD (and even) and
//!     single_core_forced is off, else all rows
//! (shard_on_h) each of the two programs takes half of H and all rows
//! gamma -> g [128, 1, H1]          # the output's layout, gamma's dtype
//! for each tile of up to BXS_FULL_TILE_SIZE rows:       (process_rmsnorm_tile)
//!     t  = load rows in the layout  [128, rows, H1]     # input dtype
//!     ss = Σ_H1 square(t)           [128, rows]         # fp32, per partition
//!     (shard_on_h) ss += the other program's ss         # sendrecv
//!     gt = t · g                    [128, rows, H1]     # fp32
//!     ss = ones[128,128]ᵀ @ ss      [128, rows]         # PSUM: Σ over partitions, on each
//!     r  = rsqrt(ss / N + eps)                          # fp32
//!     t  = gt · r                                       # input dtype
//!     store t
//! ```
//!
//! The tiles are at most `BXS_FULL_TILE_SIZE` rows because the partition sum
//! is one matmul whose moving operand is the `[128, rows]` partial sums (an
//! fp32 PSUM bank holds 512 columns). Loads and the store are strided DMAs
//! (the transposed layouts as access patterns); the library's contiguous load
//! with on-chip transposes for `H <= 2048` moves the same values.
//!
//! The kernel takes the library's signature, `input, gamma, output, eps=1e-6,
//! hidden_actual=None, hidden_dim_tp=False, single_core_forced=False,
//! shard_on_h=False, use_heap_memory=False`, writes `output` (an HBM tensor
//! the caller allocates) and returns it. `use_heap_memory` chooses the
//! library's SBUF allocator's heap or stack: here tiles are placed by the
//! compiler, so it has no effect; the library's `sbm` allocator has no
//! counterpart. SBUF-resident inputs are served by the phase helper
//! [`process_rmsnorm_tile`], which works on a loaded tile. The rules are
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
    /// programs normalise every row: the split would not pay for itself).
    pub const SHARDING_THRESHOLD: i64 = 18;

    /// Whether the default (`shard_on_bxs`) split gives each of a launch of
    /// `programs` its own `bxs` rows.
    #[nki_helper]
    pub fn rmsnorm_tkg_splits_rows(bxs: i64, programs: i64) -> bool {
        splits_rows(bxs, programs, SHARDING_THRESHOLD)
    }

    /// The tiles every row tile reads: gamma in the layout, `eps` and the ones
    /// matrix of the partition sum.
    #[nki_object]
    pub struct RmsNormTkgConsts {
        /// Gamma `[128, 1, H1]` in the output's layout.
        pub gamma: Tensor,
        /// `eps` on every partition `[128, 1]`.
        pub eps: Tensor,
        /// Ones `[128, 128]`: `onesᵀ @ s` sums `s` over the partitions onto each.
        pub ones: Tensor,
    }

    /// RMSNorm of the first `rows` rows of `t` `[128, BXS_FULL_TILE_SIZE,
    /// cols]`, in place: the squares summed along the columns, then (one
    /// matmul with ones) over the partitions, `rsqrt(sum / hidden_actual +
    /// eps)` times `t · gamma`.
    #[nki_helper]
    pub fn process_rmsnorm_tile(part: NormTkgPart, consts: RmsNormTkgConsts, t: Sbuf, rows: i64, hidden_actual: i64) {
        let (pmax, cols) = (nl::tile_size::pmax, t.shape()[2]);
        let squares = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, cols], INTER_DTYPE, buffer = nl::sbuf);
        nisa::activation(squares[s![.., 0..rows, ..]], nl::square, t[s![.., 0..rows, ..]]);
        let sums = nl::ndarray([pmax, BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::sbuf);
        nisa::tensor_reduce(sums[s![.., 0..rows]], nl::add, squares[s![.., 0..rows, ..]], 2);
        if part.shard_on_h {
            let other = 1 - nl::program_id(0);
            let remote = nl::ndarray([pmax, BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::sbuf);
            nisa::sendrecv(sums[s![.., 0..rows]], remote[s![.., 0..rows]], other, other, PIPE_ID);
            nisa::tensor_tensor(sums[s![.., 0..rows]], sums[s![.., 0..rows]], remote[s![.., 0..rows]], nl::add);
        }
        let scaled = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, cols], INTER_DTYPE, buffer = nl::sbuf);
        nisa::tensor_tensor(scaled[s![.., 0..rows, ..]], t[s![.., 0..rows, ..]], consts.gamma.broadcast(1, rows), nl::multiply);
        let total = nl::ndarray([pmax, BXS_FULL_TILE_SIZE], INTER_DTYPE, buffer = nl::psum);
        nisa::nc_matmul(total[s![.., 0..rows]], consts.ones, sums[s![.., 0..rows]]);
        let rrms = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::activation(
            rrms.reshape([pmax, BXS_FULL_TILE_SIZE])[s![.., 0..rows]],
            nl::rsqrt,
            total[s![.., 0..rows]],
            bias = consts.eps,
            scale = 1.0 / hidden_actual as f64,
        );
        nisa::tensor_tensor(
            t[s![.., 0..rows, ..]],
            scaled[s![.., 0..rows, ..]],
            rrms[s![.., 0..rows, ..]].broadcast(2, cols),
            nl::multiply,
        );
    }

    /// The part's rows, tile by tile: load, normalise, store into `output`.
    #[nki_helper]
    pub fn rmsnorm_tkg_llama_impl(part: NormTkgPart, input: Hbm, gamma: Hbm, output: Hbm, eps: f64, hidden_actual: i64) {
        let pmax = nl::tile_size::pmax;
        let cols = output.shape()[2] / part.shards * part.held;
        let c0 = part.first * cols;
        let eps_sb = nl::ndarray([pmax, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(eps_sb, eps);
        let ones = nl::ndarray([pmax, pmax], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(ones, 1.0);
        let consts = RmsNormTkgConsts {
            gamma: load_gamma_to_sbuf(gamma, cols, part.shards, part.first, part.held, part.hidden_dim_tp),
            eps: eps_sb,
            ones,
        };
        for i in nl::affine_range(part.rows.div_ceil(BXS_FULL_TILE_SIZE)) {
            let r0 = part.row0 + i * BXS_FULL_TILE_SIZE;
            let rows = (part.row0 + part.rows - r0).min(BXS_FULL_TILE_SIZE);
            let t = nl::ndarray([pmax, BXS_FULL_TILE_SIZE, cols], input.dtype(), buffer = nl::sbuf);
            load_input_to_sbuf(input, t, r0, rows, part.shards, part.first, part.held, part.hidden_dim_tp);
            process_rmsnorm_tile(part, consts, t, rows, hidden_actual);
            nisa::dma_copy(output[s![.., r0..r0 + rows, c0..c0 + cols]], t[s![.., 0..rows, ..]]);
        }
    }

    /// The rows split over a two-program launch when there are more than
    /// `SHARDING_THRESHOLD` of them (an even count), each program holding
    /// every hidden shard of the layout.
    #[nki_helper]
    pub fn rmsnorm_tkg_shard_on_bxs(
        input: Hbm,
        gamma: Hbm,
        output: Hbm,
        eps: f64,
        hidden_actual: i64,
        hidden_dim_tp: bool,
        single_core_forced: bool,
    ) {
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shards = if hidden_dim_tp || single_core_forced { 1 } else { programs };
        let part = bxs_part(input.shape()[0], programs, SHARDING_THRESHOLD, !single_core_forced, shards, hidden_dim_tp);
        rmsnorm_tkg_llama_impl(part, input, gamma, output, eps, hidden_actual);
    }

    /// Every row on each of the two programs, the hidden dim split in two:
    /// program `p` holds hidden shard `p` and the partial sums are exchanged.
    #[nki_helper]
    pub fn rmsnorm_tkg_shard_on_h(input: Hbm, gamma: Hbm, output: Hbm, eps: f64, hidden_actual: i64) {
        rmsnorm_tkg_llama_impl(h_part(input.shape()[0]), input, gamma, output, eps, hidden_actual);
    }

    /// RMSNorm of `input` `[B, S, H]` with `gamma` `[1, H]` into `output`
    /// `[128, B·S, H/128]` (the layout of the module docs), which it returns.
    /// `hidden_actual` (when the rows are zero-padded to `H`) is the count the
    /// mean square divides by.
    #[nki_kernel]
    pub fn rmsnorm_tkg(
        #[dtypes(float32, bfloat16, float16)] input: Hbm,
        #[dtypes(float32, bfloat16, float16)] gamma: Hbm,
        #[dtypes(float32, bfloat16, float16)] output: Hbm,
        #[default(1e-6)] eps: f64,
        hidden_actual: Option<i64>,
        #[default(false)] hidden_dim_tp: bool,
        #[default(false)] single_core_forced: bool,
        #[default(false)] shard_on_h: bool,
        #[default(false)] use_heap_memory: bool,
    ) -> Hbm {
        let _ = use_heap_memory;
        assert!(input.ndim() == 3, "rmsnorm_tkg: input must be [B, S, H], got {} dims", input.ndim());
        let [b, sl, h] = input.shape();
        let pmax = nl::tile_size::pmax;
        let bxs = b * sl;
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let ha = hidden_actual.unwrap_or(h);
        // The rules of `rmsnorm_tkg_violation`, checked when the kernel is traced.
        assert!(h % pmax == 0, "rmsnorm_tkg: input: H = {h} must be a multiple of 128 (the partitions)");
        assert!(bxs > 0, "rmsnorm_tkg: input: B * S = {bxs} must be positive");
        assert!(0 < ha && ha <= h, "rmsnorm_tkg: hidden_actual must be in 1..=H = {h}, got hidden_actual = {ha}");
        assert!(eps >= 0.0 && eps < f64::INFINITY, "rmsnorm_tkg: eps must be finite and non-negative, got eps = {eps}");
        assert!(!shard_on_h || programs == 2, "rmsnorm_tkg: shard_on_h needs a launch of 2 programs (LNC2), got {programs}");
        assert!(!shard_on_h || !hidden_dim_tp, "rmsnorm_tkg: shard_on_h is incompatible with hidden_dim_tp");
        assert!(!shard_on_h || !single_core_forced, "rmsnorm_tkg: shard_on_h is incompatible with single_core_forced");
        let shards = if hidden_dim_tp || single_core_forced { 1 } else { programs };
        assert!((h / pmax) % shards == 0, "rmsnorm_tkg: H / 128 = {} must split evenly over the {shards} hidden shards", h / pmax);
        let x = validate_shapes("rmsnorm_tkg", input, gamma, None, output);
        if shard_on_h {
            rmsnorm_tkg_shard_on_h(x, gamma, output, eps, ha);
        } else {
            rmsnorm_tkg_shard_on_bxs(x, gamma, output, eps, ha, hidden_dim_tp, single_core_forced);
        }
        output
    }
}
