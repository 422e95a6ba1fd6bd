//! The NKI library's `topk_reduce`: the MoE top-K reduction over the sparse
//! buffer an `all_to_all_v` leaves. Each of the `TK_padded` rows of `input`
//! (`[TK_padded, H + 2]`, bf16 or fp16) holds `H` hidden values and, in its
//! last two 16-bit columns, the global token index it belongs to packed as one
//! int32; rows of no token hold other indices (the padding). Token `t`'s
//! output row is the sum of the `K` rows whose index is `t`:
//!
//! ```text
//! indices = input[:, H:] as int32            # dma_transpose -> [1, TK_padded]
//! broadcast indices to T partitions          # stream_shuffle_broadcast
//! rows[t, 0..8] = first 8 positions of t     # iota (t on partition t), nc_find_index8
//! reduced = 0
//! for k in 0..K: reduced += input[rows[:, k], :H]   # indirect dma_compute, add
//! output = reduced
//! ```
//!
//! Tokens sit on the partitions (`T <= 128`), at most `K_MAX = 8` rows per
//! token (the positions `nc_find_index8` finds; equal values take successive
//! matches). With an LNC grid each program reduces its `H / LNC` columns.
//! The sums accumulate in the input's dtype, as the library's DMA adds do.

// The kernel keeps the library's parameter names (`T`, `K`).
#![allow(non_snake_case)]

pub use kernel::*;

/// Why a `topk_reduce` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopkReduceRule {
    /// More tokens than partitions.
    Tokens,
    /// More rows per token than `nc_find_index8` finds.
    Experts,
    /// `H` does not split over the LNC programs.
    Hidden,
    /// `H` is odd: the packed int32 indices are read as whole int32 words.
    PackedIndex,
}

impl TopkReduceRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            TopkReduceRule::Tokens => "topk_reduce: T must be <= 128",
            TopkReduceRule::Experts => "topk_reduce: K must be <= 8",
            TopkReduceRule::Hidden => "topk_reduce: H must be divisible by LNC",
            TopkReduceRule::PackedIndex => "topk_reduce: H must be even, the packed int32 token index of a row is read as int32 words",
        }
    }
}

/// One call, for [`topk_reduce_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopkReduceShape {
    /// Tokens.
    pub t: i64,
    /// Rows per token.
    pub k: i64,
    /// Hidden size (the input's columns less the two of the index).
    pub h: i64,
    /// LNC programs.
    pub lnc: i64,
}

/// The first rule a call breaks, or `None`.
pub const fn topk_reduce_violation(c: TopkReduceShape) -> Option<TopkReduceRule> {
    if c.t > P_MAX {
        return Some(TopkReduceRule::Tokens);
    }
    if c.k > K_MAX {
        return Some(TopkReduceRule::Experts);
    }
    if c.lnc < 1 || c.h % c.lnc != 0 {
        return Some(TopkReduceRule::Hidden);
    }
    if c.h % N_16BIT_ELEM_PER_INT32 != 0 {
        return Some(TopkReduceRule::PackedIndex);
    }
    None
}

/// A call checked at compile time (LNC 2 unless given), or a compile error
/// naming the rule it breaks.
///
/// ```
/// let c = nkilib::topk_reduce_config!(t = 128, k = 8, h = 4096);
/// assert_eq!(c.lnc, 2);
/// ```
///
/// ```compile_fail
/// // nc_find_index8 finds at most 8 rows per token.
/// let c = nkilib::topk_reduce_config!(t = 4, k = 9, h = 2880);
/// ```
#[macro_export]
macro_rules! topk_reduce_config {
    (t = $t:expr, k = $k:expr, h = $h:expr $(, $field:ident = $value:expr)* $(,)?) => {
        $crate::__collective_config!(
            [$crate::experimental::collectives::topk_reduce::TopkReduceShape],
            [$crate::experimental::collectives::topk_reduce::topk_reduce_violation],
            { t: $t, k: $k, h: $h, lnc: 2 },
            { $($field = $value),* }
        )
    };
}

/// The kernel with its constants and phase helpers.
#[nki::nki_module]
pub mod kernel {
    use crate::utils::stream_shuffle_broadcast::stream_shuffle_broadcast;
    use nki::prelude::*;

    /// Tokens at most: the partitions (`nl.tile_size.pmax`).
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Rows per token at most: the values one `nc_find_index8` looks up.
    pub const K_MAX: i64 = 8;
    /// 16-bit columns an int32 token index takes.
    pub const N_16BIT_ELEM_PER_INT32: i64 = 2;

    /// Every row's packed token index (`input[:, H:]` read as int32) on each
    /// of the `T` partitions of `indices` (`[T, TK_padded]` int32): a DMA
    /// transpose onto partition 0, then a broadcast.
    #[nki_helper]
    pub fn load_token_indices(input: Hbm, indices: Sbuf) {
        let [tk_padded, h_padded] = input.shape();
        let h = h_padded - N_16BIT_ELEM_PER_INT32;
        nisa::dma_transpose(
            indices.ap([[tk_padded, 1], [1, 1], [1, 1], [1, tk_padded]], offset = 0),
            input.ap(
                [[h_padded / N_16BIT_ELEM_PER_INT32, tk_padded], [1, 1], [1, 1], [1, 1]],
                offset = h / N_16BIT_ELEM_PER_INT32,
                dtype = nl::int32,
            ),
        );
        stream_shuffle_broadcast(indices, indices);
    }

    /// The rows of each token: partition `t` of the `[T, 8]` uint32 result
    /// holds the first 8 positions of `t` in `indices` (ascending; the
    /// all-ones sentinel past the last).
    #[nki_helper]
    pub fn find_token_rows(indices: Sbuf) -> Sbuf {
        let [t, _] = indices.shape();
        let arange_token_indices_T = nl::ndarray([t, K_MAX], nl::uint32, buffer = nl::sbuf);
        let gather_token_indices = nl::ndarray([t, K_MAX], nl::uint32, buffer = nl::sbuf);
        nisa::iota(arange_token_indices_T, [[0, K_MAX]], offset = 0, channel_multiplier = 1);
        nisa::nc_find_index8(gather_token_indices, indices, arange_token_indices_T);
        gather_token_indices
    }

    /// Sums, into `reduced` (`[T, H_local]`), the columns
    /// `h_start .. h_start + H_local` of the first `k` rows `rows` names per
    /// token, each added by an indirect DMA.
    #[nki_helper]
    pub fn reduce_token_rows(input: Hbm, rows: Sbuf, reduced: Sbuf, k: i64, h_start: i64) {
        let [_, h_padded] = input.shape();
        let h = h_padded - N_16BIT_ELEM_PER_INT32;
        let [t, h_local] = reduced.shape();
        // Every row is added onto zeros (the library copies the first one:
        // the same sums, but for a sum of negative zeros, which it keeps).
        nisa::memset(reduced, 0.0);
        for k_idx in 0..k {
            // Row `rows[t, k_idx]` of `input` on partition `t`.
            nisa::dma_compute(
                reduced[s![.., ..]],
                [
                    input.ap(
                        [[h, t], [1, h_local]],
                        offset = h_start,
                        vector_offset = rows.ap([[K_MAX, t], [1, 1]], offset = k_idx),
                        indirect_dim = 0,
                    ),
                    reduced[s![.., ..]],
                ],
                nl::add,
                unique_indices = true,
            );
        }
    }

    /// Each of the `T` tokens' `K` rows of `input` (`[TK_padded, H + 2]`,
    /// the token index packed in the last two columns) summed into the
    /// shared `[T, H]` result, each LNC program its `H / LNC` columns.
    #[nki_kernel]
    pub fn topk_reduce(#[dtypes(bfloat16, float16)] input: Hbm, T: i64, K: i64) -> Hbm {
        let [tk_padded, h_padded] = input.shape();
        let h = h_padded - N_16BIT_ELEM_PER_INT32;
        let grid = nl::program_ndim() != 0;
        let n_prgs = if grid { nl::num_programs(0) } else { 1 };
        let prg_id = if grid { nl::program_id(0) } else { 0 };
        assert!(T <= P_MAX, "topk_reduce: T must be <= 128, got T = {T}");
        assert!(K <= K_MAX, "topk_reduce: K must be <= 8, got K = {K}");
        assert!(h % n_prgs == 0, "topk_reduce: H must be divisible by LNC, got H = {h}, LNC = {n_prgs}");
        assert!(
            h % N_16BIT_ELEM_PER_INT32 == 0,
            "topk_reduce: H must be even, the packed int32 token index of a row is read as int32 words, got H = {h}"
        );
        let h_local = h / n_prgs;
        let reduced_sb = nl::ndarray([T, h_local], input.dtype(), buffer = nl::sbuf);
        let global_token_indices_sb = nl::ndarray([T, tk_padded], nl::int32, buffer = nl::sbuf);
        let output_hbm = nl::ndarray([T, h], input.dtype(), buffer = nl::shared_hbm);
        load_token_indices(input, global_token_indices_sb);
        let gather_token_indices = find_token_rows(global_token_indices_sb);
        reduce_token_rows(input, gather_token_indices, reduced_sb, K, h_local * prg_id);
        nisa::dma_copy(output_hbm[s![.., nl::ds(h_local * prg_id, h_local)]], reduced_sb);
        output_hbm
    }
}
