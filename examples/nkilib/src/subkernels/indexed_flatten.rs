//! The NKI library's `indexed_flatten`: the rows of an `[E, T]` HBM tensor
//! copied, in blocks of `f_len` elements, into one flat `[output_len]` array at
//! per-row block offsets; everything not written holds `padding_val`. The MoE
//! blockwise matmuls use it to lay each expert's token list out at its block.
//!
//! With `P = T / f_len` blocks per row, the output seen as
//! `[output_len / f_len, f_len]` receives row `e`'s block `p` at block
//! `row_offsets[row_offsets_start + e] + p`; a block that lands outside the
//! output is skipped (`oob_mode=skip`), so a row can be left out by giving it
//! an offset far outside (the kernel itself parks the rows a program does not
//! own at -1000000).
//!
//! ```text
//! partial = padding_val everywhere           # this program's private [output_len / f_len, f_len]
//! offsets = row_offsets[start + E_offset ..][:E_per_shard]   # -1000000 past them
//! for each of this program's rows e (the most any program has):
//!     offset = offsets[e]                    # read on the device: scalar_offset
//!     for each tile of up to 128 of the row's P blocks:
//!         tile[blocks, f_len] = input[e, blocks]          # blocks on the partitions
//!         partial[offset + blocks] = tile                 # DMA, out-of-range blocks skipped
//! (LNC2) out = max(partial, the other program's partial)  # one sendrecv
//! program 0 stores out
//! ```
//!
//! Rows are split over the LNC programs as the library does: program 0 takes
//! `ceil(E / 2)` rows, program 1 the rest; the two partial outputs are merged
//! by an element-wise maximum, so the values written must be at least
//! `padding_val` (the library's use: token indices over a -1 padding) and
//! blocks written by both programs keep the larger value. Without a grid (one
//! program) the partial output is the output.
//!
//! The library documents the kernel for `T` up to 10240 per row (larger rows
//! run, more slowly).

use nki::prelude::*;

pub use kernel::*;

/// Why an `indexed_flatten` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedFlattenRule {
    /// `f_len` is not positive.
    FLen,
    /// `output_len` is not a positive multiple of 128 and of `f_len`.
    OutputLen,
    /// `T` is not a multiple of `f_len` with a multiple of 16 blocks.
    RowBlocks,
    /// `N != E` without `row_offsets_start`, or `N < E` with it.
    Offsets,
    /// More than two programs (the merge is one exchange between two).
    Programs,
}

impl IndexedFlattenRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            IndexedFlattenRule::FLen => "indexed_flatten: f_len must be positive",
            IndexedFlattenRule::OutputLen => "indexed_flatten: output_len must be a positive multiple of 128 and of f_len",
            IndexedFlattenRule::RowBlocks => "indexed_flatten: T must be a multiple of f_len, and T / f_len a multiple of 16",
            IndexedFlattenRule::Offsets => "indexed_flatten: row_offsets must hold E offsets (at least E with row_offsets_start)",
            IndexedFlattenRule::Programs => "indexed_flatten: runs on one or two LNC programs",
        }
    }
}

/// The shape of one `indexed_flatten` call, for [`indexed_flatten_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexedFlattenShape {
    /// Rows `E` of the input.
    pub e: i64,
    /// Elements `T` per row.
    pub t: i64,
    /// Elements per block.
    pub f_len: i64,
    /// Elements of the output.
    pub output_len: i64,
    /// Offsets `N` in `row_offsets`.
    pub n: i64,
    /// Whether `row_offsets_start` is given.
    pub row_offsets_start: bool,
    /// LNC programs.
    pub programs: i64,
}

/// The first library rule a call breaks, or `None`.
pub const fn indexed_flatten_violation(c: IndexedFlattenShape) -> Option<IndexedFlattenRule> {
    if c.f_len < 1 {
        return Some(IndexedFlattenRule::FLen);
    }
    if c.output_len < P_MAX || c.output_len % P_MAX != 0 || c.output_len % c.f_len != 0 {
        return Some(IndexedFlattenRule::OutputLen);
    }
    if c.t < 1 || c.t % c.f_len != 0 || (c.t / c.f_len) % DMA_BLOCK_MULTIPLE != 0 {
        return Some(IndexedFlattenRule::RowBlocks);
    }
    if (c.row_offsets_start && c.n < c.e) || (!c.row_offsets_start && c.n != c.e) {
        return Some(IndexedFlattenRule::Offsets);
    }
    if c.programs < 1 || c.programs > 2 {
        return Some(IndexedFlattenRule::Programs);
    }
    None
}

/// An `indexed_flatten` call checked at compile time: the
/// [`IndexedFlattenShape`] of the given fields (`n` defaulting to `e`, no
/// `row_offsets_start`, 2 programs as the library runs it), or a compile
/// error naming the rule it breaks.
///
/// ```
/// let c = nkilib::indexed_flatten_config!(e = 17, t = 10240, f_len = 128, output_len = 175104);
/// assert_eq!(c.n, 17);
/// ```
///
/// ```compile_fail
/// // 4096 / 512 = 8 blocks per row: not a multiple of 16.
/// let c = nkilib::indexed_flatten_config!(e = 2, t = 4096, f_len = 512, output_len = 9216);
/// ```
#[macro_export]
macro_rules! indexed_flatten_config {
    (e = $e:expr, t = $t:expr, f_len = $f:expr, output_len = $o:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        const CALL: $crate::subkernels::indexed_flatten::IndexedFlattenShape =
            $crate::subkernels::indexed_flatten::IndexedFlattenShape {
                $($field: $value,)*
                ..$crate::subkernels::indexed_flatten::IndexedFlattenShape {
                    e: $e,
                    t: $t,
                    f_len: $f,
                    output_len: $o,
                    n: $e,
                    row_offsets_start: false,
                    programs: 2,
                }
            };
        const _: () = if let Some(rule) = $crate::subkernels::indexed_flatten::indexed_flatten_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel with its constants and phase helpers.
#[nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Partitions: blocks per copied tile, and the output's SBUF layout.
    pub const P_MAX: i64 = 128;
    /// A row's block count must be a multiple of this for its DMAs.
    pub const DMA_BLOCK_MULTIPLE: i64 = 16;
    /// The offset of a row a program does not own: every block out of range.
    pub const INVALID_OFFSET_VALUE: i64 = -1000000;
    /// The pipe of the merging exchange.
    pub const PIPE_ID: i64 = 0;

    /// The shapes and this program's rows.
    #[nki_object]
    pub struct FlattenDims {
        /// Rows `E` of the input.
        pub e: i64,
        /// Elements per block.
        pub f_len: i64,
        /// Blocks per row, `T / f_len`.
        pub partitions_per_row: i64,
        /// This program's first row.
        pub e_offset: i64,
        /// This program's rows.
        pub e_per_shard: i64,
        /// The most rows any program has: every program's loop count.
        pub max_e_per_shard: i64,
    }

    /// This program's row offsets (`[1, max_e_per_shard]` int32), from
    /// `row_offsets[row_offsets_start + e_offset ..]`, `INVALID_OFFSET_VALUE`
    /// past its rows.
    #[nki_helper]
    pub fn load_row_offsets(dims: FlattenDims, row_offsets: Hbm, row_offsets_start: Option<Hbm>) -> Sbuf {
        let n = row_offsets.shape()[0];
        let offsets_2d = row_offsets.reshape([1, n]);
        let local = nl::ndarray([1, dims.max_e_per_shard], nl::int32, buffer = nl::sbuf);
        nisa::memset(local, INVALID_OFFSET_VALUE);
        let (e0, rows) = (dims.e_offset, dims.e_per_shard);
        if rows > 0 {
            if let Some(start) = row_offsets_start {
                let start_sb = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
                nisa::dma_copy(start_sb, start.reshape([1, 1]));
                nisa::dma_copy(
                    local[s![0..1, 0..rows]],
                    offsets_2d.ap([[n, 1], [1, rows]], offset = e0, scalar_offset = start_sb, indirect_dim = 1),
                );
            } else {
                nisa::dma_copy(local[s![0..1, 0..rows]], offsets_2d[s![0..1, e0..e0 + rows]]);
            }
        }
        local
    }

    /// Copies this program's rows block tile by block tile into `partial`
    /// (`[blocks, f_len]`) at their offsets, skipping blocks out of range.
    #[nki_helper]
    pub fn scatter_rows(dims: FlattenDims, input_tensor: Hbm, offsets: Sbuf, partial: Hbm) {
        let f_len = dims.f_len;
        let ppr = dims.partitions_per_row;
        let input_blocks = input_tensor.reshape([dims.e, ppr, f_len]);
        for row_idx_local in nl::sequential_range(dims.max_e_per_shard) {
            let row_offset = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::dma_copy(row_offset, offsets[s![0..1, row_idx_local..row_idx_local + 1]]);
            // A program with fewer rows re-reads the last one; its offset parks it out of range.
            let row_idx = (row_idx_local + dims.e_offset).min(dims.e - 1);
            for tile_idx in nl::sequential_range(ppr.div_ceil(P_MAX)) {
                let start = tile_idx * P_MAX;
                let count = (ppr - start).min(P_MAX);
                let tile = nl::ndarray([count, f_len], input_tensor.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(tile, input_blocks[s![row_idx, start..start + count, 0..f_len]]);
                nisa::dma_copy(
                    partial.ap([[f_len, count], [1, f_len]], offset = start * f_len, scalar_offset = row_offset, indirect_dim = 0),
                    tile,
                    oob_mode = nisa::oob_mode::skip,
                );
            }
        }
    }

    /// `input_tensor`'s rows (`[E, T]`) in blocks of `f_len` at the block
    /// offsets `row_offsets[row_offsets_start + e]` of a flat `[output_len]`
    /// array in the input's dtype, `padding_val` elsewhere; blocks past the end
    /// (or before the start) are skipped.
    #[nki_kernel]
    pub fn indexed_flatten(
        #[dtypes(int32, float32, bfloat16, float16)] input_tensor: Hbm,
        f_len: i64,
        output_len: i64,
        #[dtypes(int32)] row_offsets: Hbm,
        #[dtypes(int32)] row_offsets_start: Option<Hbm>,
        #[default(-1)] padding_val: i64,
    ) -> Hbm {
        let [e, t] = input_tensor.shape();
        let n = row_offsets.shape()[0];
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let program = if grid { nl::program_id(0) } else { 0 };
        // The rules of `indexed_flatten_violation`, checked when the kernel is traced.
        assert!(f_len >= 1, "indexed_flatten: f_len must be positive, got f_len = {f_len}");
        assert!(
            output_len >= P_MAX && output_len % P_MAX == 0 && output_len % f_len == 0,
            "indexed_flatten: output_len must be a positive multiple of 128 and of f_len = {f_len}, got output_len = {output_len}"
        );
        assert!(
            t % f_len == 0 && (t / f_len) % DMA_BLOCK_MULTIPLE == 0,
            "indexed_flatten: T must be a multiple of f_len, and T / f_len a multiple of 16, got T = {t}, f_len = {f_len}"
        );
        assert!(
            if row_offsets_start.is_some() { n >= e } else { n == e },
            "indexed_flatten: row_offsets must hold E offsets (at least E with row_offsets_start), got N = {n}, E = {e}"
        );
        assert!(programs <= 2, "indexed_flatten: runs on one or two LNC programs, got {programs}");

        // Program 0 takes ceil(E / programs) rows, program 1 the rest.
        let first_rows = e.div_ceil(programs);
        let dims = FlattenDims {
            e,
            f_len,
            partitions_per_row: t / f_len,
            e_offset: if program == 0 { 0 } else { first_rows },
            e_per_shard: if program == 0 { first_rows } else { e / programs },
            max_e_per_shard: first_rows,
        };
        let index_dtype = input_tensor.dtype();
        let cols = output_len / P_MAX;
        let partial = nl::ndarray([output_len / f_len, f_len], index_dtype, buffer = nl::private_hbm);
        let init = nl::ndarray([P_MAX, cols], index_dtype, buffer = nl::sbuf);
        nisa::memset(init, padding_val);
        nisa::dma_copy(partial.reshape([P_MAX, cols]), init);

        let offsets = load_row_offsets(dims, row_offsets, row_offsets_start);
        scatter_rows(dims, input_tensor, offsets, partial);

        let result = nl::ndarray([P_MAX, cols], index_dtype, buffer = nl::sbuf);
        nisa::dma_copy(result, partial.reshape([P_MAX, cols]));
        if programs == 2 {
            let remote = nl::ndarray([P_MAX, cols], index_dtype, buffer = nl::sbuf);
            let other = 1 - program;
            nisa::sendrecv(result, remote, other, other, PIPE_ID);
            nisa::tensor_tensor(result, result, remote, nl::maximum);
        }
        let flattened_array = nl::ndarray([output_len], index_dtype, buffer = nl::shared_hbm);
        if program == 0 {
            nisa::dma_copy(flattened_array.reshape([P_MAX, cols]), result);
        }
        flattened_array
    }
}
