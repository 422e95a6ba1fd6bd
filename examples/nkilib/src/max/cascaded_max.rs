//! The NKI library's `cascaded_max`: the largest value of each row of `[B, S,
//! V]` (or `[BxS, V]`) and the column it stands in, reduced in two stages.
//!
//! A row of `V` values on one partition would leave the other partitions idle,
//! so each row is folded over `n_stages` partitions of `c = ceil(V / n_stages)`
//! columns, a partition's maximum found along its free dim, and the row's
//! maximum then found among its `n_stages` partial maxima:
//!
//! ```text
//! rows per program  r = ceil(BxS / programs)   (one program when BxS = 1)
//! n_stages = min(128 / r, V / 128);  c = ceil(V / n_stages)
//! values = folded load          [r·n_stages, c]    row i, stage f on partition i·n_stages + f
//! local  = max along c          [r·n_stages, 1]
//! col    = nc_find_index8(values, local)[:, 0]     first column holding it
//! local, col -> transposed to   [1, r·n_stages]    (PE transposes, exact moves)
//! index  = col + f·c            global column      (offsets from iota)
//! for each row (grouped_reduce_max over its n_stages):
//!     max_values  = max of local
//!     max_indices = smallest index among the stages holding it
//! ```
//!
//! Each program writes its rows of the `[B, S, 1]` outputs (values in the
//! input's dtype, indices `uint32`).
//!
//! Exact indices: the library carries the columns through tiles of the input's
//! dtype, so a `bfloat16` input rounds every index above 256 (and the global
//! index is the rounded column plus the rounded offset). Here the columns and
//! offsets are held in `float32` (`INDEX_DTYPE`), exact for every `V` the rules
//! allow (`V < 2^24`), so the index is the documented one for both dtypes.
//! Equal maxima: the library returns the largest index among the stages that
//! hold the maximum; here it is the first column holding it, as `argmax`
//! returns. Padding (the last stage past `V`) holds the dtype's lowest finite
//! value rather than the library's `-9948.0`, so rows whose values all lie
//! below `-9948` still report their own maximum; values must not be NaN.
//!
//! The kernel takes the library's signature, `input_tensor`, and returns
//! `(max_values, max_indices)`. Its rules are [`cascaded_max_violation`]'s.

use nki::prelude::*;

pub use kernel::*;

/// Why a `cascaded_max` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CascadedMaxRule {
    /// There must be at least one row.
    Rows,
    /// A program's rows must fit the 128 partitions.
    RowsPerProgram,
    /// `V` must be at least 128 (one stage of 128 columns).
    Vocab,
    /// A stage's `ceil(V / n_stages)` columns must fit a partition.
    StageFree,
}

impl CascadedMaxRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            CascadedMaxRule::Rows => "cascaded_max: B * S must be at least 1",
            CascadedMaxRule::RowsPerProgram => "cascaded_max: each program's rows, ceil(B * S / programs), must be at most 128",
            CascadedMaxRule::Vocab => "cascaded_max: V must be at least 128",
            CascadedMaxRule::StageFree => "cascaded_max: a stage's ceil(V / n_stages) columns must be at most 32768",
        }
    }
}

/// The first rule `bxs` rows of `vocab_size` columns over `programs` LNC
/// programs break.
pub const fn cascaded_max_violation(bxs: i64, vocab_size: i64, programs: i64) -> Option<CascadedMaxRule> {
    if bxs < 1 || programs < 1 {
        return Some(CascadedMaxRule::Rows);
    }
    let per = if bxs == 1 { 1 } else { (bxs + programs - 1) / programs };
    if per > P_MAX {
        return Some(CascadedMaxRule::RowsPerProgram);
    }
    if vocab_size < P_MAX {
        return Some(CascadedMaxRule::Vocab);
    }
    let n = if P_MAX / per < vocab_size / P_MAX { P_MAX / per } else { vocab_size / P_MAX };
    if (vocab_size + n - 1) / n > MAX_STAGE_FREE {
        return Some(CascadedMaxRule::StageFree);
    }
    None
}

/// A `cascaded_max` shape checked at compile time: `cascaded_max_config!(bxs =
/// 40, vocab = 8192, programs = 2)` is `(bxs, vocab)`, or a compile error
/// naming the rule it breaks.
///
/// ```
/// assert_eq!(nkilib::cascaded_max_config!(bxs = 256, vocab = 3168, programs = 2), (256, 3168));
/// ```
///
/// ```compile_fail
/// // 256 rows on one program exceed the partitions.
/// let c = nkilib::cascaded_max_config!(bxs = 256, vocab = 3168, programs = 1);
/// ```
#[macro_export]
macro_rules! cascaded_max_config {
    (bxs = $b:expr, vocab = $v:expr, programs = $p:expr) => {{
        const _: () = if let Some(rule) = $crate::max::cascaded_max::cascaded_max_violation($b, $v, $p) {
            panic!("{}", rule.message());
        };
        ($b, $v)
    }};
}

/// The kernel, its configuration and phase helpers.
#[nki_module]
pub mod kernel {
    // The configuration keeps the library's field names.
    #![allow(non_snake_case)]

    use crate::max::cascaded_max_utils::{predicated_folded_load, rows_and_vocab};
    use nki::prelude::*;

    /// Partitions a row tile and its stages share.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Columns a stage may hold on one partition (128 KiB of `float32`).
    pub const MAX_STAGE_FREE: i64 = 32768;
    /// The dtype columns and global indices are computed in: exact integers
    /// below 2^24.
    pub const INDEX_DTYPE: Dtype = nl::float32;
    /// The dtype of the returned indices.
    pub const OUT_INDEX_DTYPE: Dtype = nl::uint32;
    /// Candidates `nc_find_index8` locates per partition (the first is used).
    pub const FIND_WIDTH: i64 = 8;
    /// The lowest finite `bfloat16`, the padding of `bfloat16` rows.
    pub const BF16_LOWEST: f64 = -3.3895313892515355e38;

    /// The library's `CascadedMaxConfig`: the rows, their split over the LNC
    /// programs and the stages each row is folded over.
    #[nki_object]
    pub struct CascadedMaxConfig {
        /// Rows: the product of every dim but the last.
        pub BxS: i64,
        /// Columns of a row (the last dim).
        pub vocab_size: i64,
        /// Programs the rows are split over (1 when there is one row).
        pub n_prgs: i64,
        /// This program.
        pub prg_id: i64,
        /// Rows per program, `ceil(BxS / n_prgs)`.
        pub per_lnc_BxS: i64,
        /// Rows this program holds (fewer on the last program).
        pub per_lnc_BxS_unpadded: i64,
        /// Partitions each row is folded over.
        pub n_stages: i64,
        /// Columns per stage, `ceil(vocab_size / n_stages)`.
        pub stage_free_size: i64,
        /// `n_stages · stage_free_size`.
        pub padded_vocab_size: i64,
    }

    /// The configuration of `bxs` rows of `vocab_size` columns on program
    /// `program` of `programs`, refusing the rules of
    /// [`cascaded_max_violation`](super::cascaded_max_violation).
    #[nki_helper]
    pub fn cascaded_max_config(bxs: i64, vocab_size: i64, programs: i64, program: i64) -> CascadedMaxConfig {
        assert!(bxs >= 1, "cascaded_max: input_tensor: B * S must be at least 1, got {bxs}");
        let n_prgs = if bxs == 1 { 1 } else { programs };
        let prg_id = if bxs == 1 { 0 } else { program };
        let per = bxs.div_ceil(n_prgs);
        assert!(per <= P_MAX, "cascaded_max: input_tensor: {per} rows per program (B * S = {bxs} over {n_prgs}) exceed 128");
        assert!(vocab_size >= P_MAX, "cascaded_max: input_tensor: V = {vocab_size} must be at least 128");
        let n_stages = (P_MAX / per).min(vocab_size / P_MAX);
        let chunk = vocab_size.div_ceil(n_stages);
        assert!(chunk <= MAX_STAGE_FREE, "cascaded_max: input_tensor: a stage's {chunk} columns exceed {MAX_STAGE_FREE}");
        CascadedMaxConfig {
            BxS: bxs,
            vocab_size,
            n_prgs,
            prg_id,
            per_lnc_BxS: per,
            per_lnc_BxS_unpadded: per.min(bxs - per * prg_id),
            n_stages,
            stage_free_size: chunk,
            padded_vocab_size: chunk * n_stages,
        }
    }

    /// `[1, repeat_count · n_stages]`: the column offset `f · stage_size` of
    /// stage `f`, repeated for each row.
    #[nki_helper]
    pub fn repeat(n_stages: i64, stage_size: i64, repeat_count: i64) -> Sbuf {
        let offsets = nl::ndarray([1, repeat_count * n_stages], INDEX_DTYPE, buffer = nl::sbuf);
        nisa::iota(offsets, [[0, repeat_count], [stage_size, n_stages]]);
        offsets
    }

    /// Per group of `fold_factor` consecutive columns of `input_tensor` `[1,
    /// n]`: its maximum, and the smallest `index` among the columns holding it
    /// (as `V − max(mask · (V − index))`, `V` any bound above the indices).
    #[nki_helper]
    pub fn grouped_reduce_max(input_tensor: Psum, index: Sbuf, fold_factor: i64, bound: i64) -> (Sbuf, Sbuf) {
        let n = input_tensor.shape()[1];
        let groups = n / fold_factor;
        let grouped = [1, groups, fold_factor];
        let reduced_max = nl::ndarray([1, groups], input_tensor.dtype(), buffer = nl::sbuf);
        nisa::tensor_reduce(reduced_max, nl::maximum, input_tensor.reshape(grouped), 2);
        let mask = nl::ndarray(grouped, INDEX_DTYPE, buffer = nl::sbuf);
        nisa::tensor_tensor(mask, input_tensor.reshape(grouped), reduced_max.reshape([1, groups, 1]).broadcast(2, fold_factor), nl::equal);
        let from_bound = nl::ndarray(grouped, INDEX_DTYPE, buffer = nl::sbuf);
        nisa::tensor_scalar(from_bound, index.reshape(grouped), nl::multiply, -1.0, op1 = nl::add, operand1 = bound as f64);
        nisa::tensor_tensor(from_bound, from_bound, mask, nl::multiply);
        let final_index = nl::ndarray([1, groups], INDEX_DTYPE, buffer = nl::sbuf);
        nisa::tensor_reduce(final_index, nl::maximum, from_bound, 2);
        nisa::tensor_scalar(final_index, final_index, nl::multiply, -1.0, op1 = nl::add, operand1 = bound as f64);
        (reduced_max, final_index)
    }

    /// This program's rows of `inp` `[BxS, V]`: each row's maximum `[1,
    /// per_lnc_BxS]` and its column (`INDEX_DTYPE`), by the two stages of the
    /// module docs.
    #[nki_helper]
    pub fn cascaded_max_core(inp: Hbm, config: CascadedMaxConfig) -> (Sbuf, Sbuf) {
        let (n, rows) = (config.n_stages, config.per_lnc_BxS);
        let parts = n * rows;
        let fill = if inp.dtype() == nl::bfloat16 { BF16_LOWEST } else { f32::MIN as f64 };
        let b0 = config.prg_id * rows;
        let values = predicated_folded_load(inp, n, b0, config.per_lnc_BxS_unpadded, rows, fill);
        let value = nl::ndarray([parts, 1], inp.dtype(), buffer = nl::sbuf);
        nisa::tensor_reduce(value, nl::maximum, values, 1);
        let ind_buf = nl::ndarray([parts, FIND_WIDTH], OUT_INDEX_DTYPE, buffer = nl::sbuf);
        nisa::nc_find_index8(ind_buf, values, value.broadcast(1, FIND_WIDTH));
        let column = nl::ndarray([parts, 1], INDEX_DTYPE, buffer = nl::sbuf);
        nisa::tensor_copy(column, ind_buf[s![.., 0..1]]);
        // Partition i·n + f to column i·n + f of one partition.
        let ind_t = nl::ndarray([1, parts], INDEX_DTYPE, buffer = nl::psum);
        nisa::nc_transpose(ind_t, column);
        let ind_shifted = nl::ndarray([1, parts], INDEX_DTYPE, buffer = nl::sbuf);
        nisa::tensor_tensor(ind_shifted, ind_t, repeat(n, config.stage_free_size, rows), nl::add);
        let value_t = nl::ndarray([1, parts], inp.dtype(), buffer = nl::psum);
        nisa::nc_transpose(value_t, value);
        grouped_reduce_max(value_t, ind_shifted, n, config.padded_vocab_size)
    }

    /// The largest value of each row of `input_tensor` (`[B, S, V]` or `[BxS,
    /// V]`, float32 or bfloat16) and its column, both shaped like the input
    /// with 1 for `V`: values in the input's dtype, indices `uint32` (the
    /// first column holding the maximum). Rows are split over the LNC programs.
    #[nki_kernel]
    pub fn cascaded_max(#[dtypes(float32, bfloat16)] input_tensor: Hbm) -> (Hbm, Hbm) {
        let (bxs, vocab_size): (i64, i64) = rows_and_vocab(input_tensor, "cascaded_max", "input_tensor must be [B, S, V] or [BxS, V]");
        let (rank, shape) = (input_tensor.ndim(), input_tensor.shape());
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let program = if grid { nl::program_id(0) } else { 0 };
        let config: CascadedMaxConfig = cascaded_max_config(bxs, vocab_size, programs, program);
        let (val, indx) = cascaded_max_core(input_tensor.reshape([bxs, vocab_size]), config);

        let max_values = if rank == 3 {
            nl::ndarray([shape[0], shape[1], 1], input_tensor.dtype(), buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bxs, 1], input_tensor.dtype(), buffer = nl::shared_hbm)
        };
        let max_indices = if rank == 3 {
            nl::ndarray([shape[0], shape[1], 1], OUT_INDEX_DTYPE, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bxs, 1], OUT_INDEX_DTYPE, buffer = nl::shared_hbm)
        };
        let rows = config.per_lnc_BxS_unpadded;
        let r0 = config.prg_id * config.per_lnc_BxS;
        let indices = nl::ndarray([1, config.per_lnc_BxS], OUT_INDEX_DTYPE, buffer = nl::sbuf);
        nisa::tensor_copy(indices, indx);
        nisa::dma_copy(max_values.reshape([1, bxs])[s![.., r0..r0 + rows]], val[s![.., 0..rows]]);
        nisa::dma_copy(max_indices.reshape([1, bxs])[s![.., r0..r0 + rows]], indices[s![.., 0..rows]]);
        (max_values, max_indices)
    }
}
