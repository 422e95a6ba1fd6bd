//! The NKI library's `find_nonzero_indices`: for each column `c` of a `[T, C]`
//! HBM tensor, the positions `t` where `input_tensor[t, c] != 0`, in ascending
//! order and padded with -1 to length `T`, and how many there are. The MoE
//! kernels use it to turn a token-to-expert mask into each expert's token list.
//!
//! The GpSimd Engine's `nonzero_with_count` does the search: each of its 8
//! cores reads one partition (0, 16, ..., 112) and writes that partition's
//! nonzero positions followed by their count. So 8 columns go per round, each
//! column laid along the free dim of its core's partition:
//!
//! ```text
//! for each round of up to 8 of this program's columns:
//!     offsets[8] = 0                                  # indices written so far
//!     for each chunk of chunk_size tokens:
//!         x[128, chunk/128, 8]  = DMA of the round's columns (tokens on the partitions)
//!         aligned[128, chunk/128, 128] = 0; aligned[:, :, 16·j] = x[:, :, j]     # ACT copies
//!         per 128-token tile: xt[:, tile, :] = transpose(aligned[:, tile, :])    # PE, is_transpose
//!         idx[128, 1, chunk + 1] = nonzero_with_count(xt, index_offset = chunk start)
//!         even cores (partitions 0, 32, 64, 96): store_indices_and_count
//!         shuffle partition 16 of each quadrant onto its partition 0
//!         odd cores (now at 0, 32, 64, 96):      store_indices_and_count
//!     nonzero_counts[round] = offsets
//! store_indices_and_count(core j):
//!     indices[column j, offsets[j] : offsets[j] + chunk] = idx[core j, 0:chunk]   # scalar_offset DMA
//!     offsets[j] += idx[core j, chunk]                                            # the count
//! ```
//!
//! A chunk's `chunk_size` indices are written at the column's running count, so
//! the padding of one chunk is overwritten by the next chunk's hits; with more
//! than one chunk the output is first filled with -1 (one DMA from a memset
//! tile), with one chunk the instruction's own padding fills it.
//!
//! Columns are split evenly over the LNC programs (`C / programs` each, the
//! library's LNC2 layout; one program without a grid). With `col_start_id` (an
//! HBM `[1]` int32 tensor read on the device) and `n_cols`, only columns
//! `col_start_id .. col_start_id + n_cols` are searched and the outputs are
//! `[n_cols, T]` and `[n_cols]`.
//!
//! Differences from the library: the aligned tile is zeroed before the column
//! copies (the library leaves the partitions no core reads unwritten; the
//! transpose would read them), and one program without a grid is accepted.
//! `col_start_id` without `n_cols` is refused where the library ignores it.
//!
//! The library documents the kernel for `T` up to 65536 and `C` up to 128.

use nki::prelude::*;

pub use kernel::*;

/// Why a `find_nonzero_indices` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindNonzeroRule {
    /// `T` is not a positive multiple of 128.
    Tokens,
    /// `chunk_size` is not a positive multiple of 128 dividing `T`.
    ChunkSize,
    /// `n_cols` is not within `1..=C`.
    Columns,
    /// The searched columns do not split evenly over the programs.
    ColumnShards,
    /// `col_start_id` without `n_cols`.
    ColStartNeedsNCols,
}

impl FindNonzeroRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            FindNonzeroRule::Tokens => "find_nonzero_indices: T must be a positive multiple of 128",
            FindNonzeroRule::ChunkSize => "find_nonzero_indices: chunk_size must be a positive multiple of 128 that divides T",
            FindNonzeroRule::Columns => "find_nonzero_indices: n_cols must be within 1..=C",
            FindNonzeroRule::ColumnShards => "find_nonzero_indices: the searched columns must split evenly over the LNC programs",
            FindNonzeroRule::ColStartNeedsNCols => "find_nonzero_indices: col_start_id needs n_cols",
        }
    }
}

/// The shape of one `find_nonzero_indices` call, for [`find_nonzero_indices_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FindNonzeroShape {
    /// Tokens `T` (rows of the input).
    pub t: i64,
    /// Columns `C` of the input.
    pub c: i64,
    /// `chunk_size` (`T` when not given).
    pub chunk_size: i64,
    /// Whether `col_start_id` is given.
    pub col_start: bool,
    /// `n_cols` (0 when not given).
    pub n_cols: i64,
    /// LNC programs sharing the columns.
    pub programs: i64,
}

/// The first library rule a call breaks, or `None`.
pub const fn find_nonzero_indices_violation(c: FindNonzeroShape) -> Option<FindNonzeroRule> {
    if c.t < T_TILE_SIZE || c.t % T_TILE_SIZE != 0 {
        return Some(FindNonzeroRule::Tokens);
    }
    if c.chunk_size < T_TILE_SIZE || c.chunk_size % T_TILE_SIZE != 0 || c.t % c.chunk_size != 0 {
        return Some(FindNonzeroRule::ChunkSize);
    }
    if c.col_start && c.n_cols == 0 {
        return Some(FindNonzeroRule::ColStartNeedsNCols);
    }
    let cols = if c.col_start { c.n_cols } else { c.c };
    if cols < 1 || cols > c.c {
        return Some(FindNonzeroRule::Columns);
    }
    if c.programs < 1 || cols % c.programs != 0 {
        return Some(FindNonzeroRule::ColumnShards);
    }
    None
}

/// A `find_nonzero_indices` call checked at compile time: the
/// [`FindNonzeroShape`] of the given fields (`chunk_size` defaulting to `T`,
/// no `col_start_id`, 2 programs as the library runs it), or a compile error
/// naming the rule it breaks.
///
/// ```
/// let c = nkilib::find_nonzero_indices_config!(t = 65536, c = 128, chunk_size = 16384);
/// assert_eq!(c.chunk_size, 16384);
/// let c = nkilib::find_nonzero_indices_config!(t = 4096, c = 128, col_start = true, n_cols = 4);
/// assert_eq!(c.chunk_size, 4096);
/// ```
///
/// ```compile_fail
/// // chunk_size must divide T.
/// let c = nkilib::find_nonzero_indices_config!(t = 4096, c = 128, chunk_size = 1536);
/// ```
#[macro_export]
macro_rules! find_nonzero_indices_config {
    (t = $t:expr, c = $c:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        const CALL: $crate::subkernels::find_nonzero_indices::FindNonzeroShape =
            $crate::subkernels::find_nonzero_indices::FindNonzeroShape {
                $($field: $value,)*
                ..$crate::subkernels::find_nonzero_indices::FindNonzeroShape {
                    t: $t,
                    c: $c,
                    chunk_size: $t,
                    col_start: false,
                    n_cols: 0,
                    programs: 2,
                }
            };
        const _: () = if let Some(rule) = $crate::subkernels::find_nonzero_indices::find_nonzero_indices_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel with its constants and phase helpers.
#[nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Partitions of one `nc_stream_shuffle` quadrant.
    pub const QUADRANT_SIZE: i64 = 32;
    /// Quadrants of the 128 partitions.
    pub const NUM_QUADRANTS: i64 = 4;
    /// GpSimd cores: columns searched per round.
    pub const NUM_GPSIMD_CORES: i64 = 8;
    /// GpSimd cores per quadrant (an even and an odd one).
    pub const GPSIMD_CORES_PER_QUADRANT: i64 = 2;
    /// Partitions between two GpSimd cores' first partitions (0, 16, ..., 112).
    pub const PARTITIONS_PER_GPSIMD: i64 = 16;
    /// Tokens per tile: the partitions a loaded tile spans.
    pub const T_TILE_SIZE: i64 = 128;
    /// Columns per tile: the partitions of the transposed tile.
    pub const C_TILE_SIZE: i64 = 128;
    /// A shuffle-mask entry that leaves its destination partition unwritten.
    pub const SHUFFLE_KEEP: i64 = 255;
    /// The shapes and this program's share of the columns.
    #[nki_object]
    pub struct NonzeroDims {
        /// Tokens `T`.
        pub t_dim: i64,
        /// Columns of the input tensor.
        pub c_dim: i64,
        /// Columns this program searches.
        pub c_per_shard: i64,
        /// First output column of this program.
        pub c_offset: i64,
        /// Tokens per chunk.
        pub chunk_size: i64,
        /// 128-token tiles per chunk.
        pub chunk_t_tiles: i64,
    }

    /// One round's position: its index, its first input column (before
    /// `col_start_id`) and how many of its 8 columns exist.
    #[nki_object]
    pub struct NonzeroRound {
        /// Round index.
        pub idx: i64,
        /// First column of the round, relative to `col_start_id`.
        pub column_start: i64,
        /// Columns in this round (8 but in the last).
        pub n_columns: i64,
    }

    /// Loads `chunk_idx`'s tokens of the round's columns to `[128, tiles, 8]`
    /// (tokens on the partitions), offset by `col_start_id` when given.
    #[nki_helper]
    pub fn load_chunk(dims: NonzeroDims, round: NonzeroRound, input_tensor: Hbm, col_start: Option<Sbuf>, chunk_idx: i64) -> Sbuf {
        let tiles = dims.chunk_t_tiles;
        let input_sbuf = nl::ndarray([T_TILE_SIZE, tiles, NUM_GPSIMD_CORES], input_tensor.dtype(), buffer = nl::sbuf);
        let pattern = [[dims.c_dim, T_TILE_SIZE], [dims.c_dim * T_TILE_SIZE, tiles], [1, round.n_columns]];
        let offset = round.column_start + chunk_idx * dims.chunk_size * dims.c_dim;
        let dst = input_sbuf[s![.., 0..tiles, 0..round.n_columns]];
        if let Some(start) = col_start {
            nisa::dma_copy(
                dst,
                input_tensor.ap(pattern, offset = offset, scalar_offset = start, indirect_dim = 1),
                dge_mode = nisa::dge_mode::hwdge,
            );
        } else {
            nisa::dma_copy(dst, input_tensor.ap(pattern, offset = offset));
        }
        input_sbuf
    }

    /// Places column `j` of `input_sbuf` on partition `16·j` of a zeroed tile and
    /// transposes it per 128-token tile on the PE: the result `[128, tiles, 128]`
    /// holds column `j`'s tokens along the free dim of GpSimd core `j`'s partition.
    #[nki_helper]
    pub fn align_for_gpsimd(dims: NonzeroDims, round: NonzeroRound, input_sbuf: Sbuf, identity: Sbuf) -> Sbuf {
        let tiles = dims.chunk_t_tiles;
        let aligned = nl::ndarray([T_TILE_SIZE, tiles, C_TILE_SIZE], nl::float32, buffer = nl::sbuf);
        nisa::memset(aligned, 0.0);
        for column_idx in 0..round.n_columns {
            nisa::tensor_copy(
                aligned[s![.., .., column_idx * PARTITIONS_PER_GPSIMD]],
                input_sbuf[s![.., .., column_idx]],
                engine = nisa::engine::scalar,
            );
        }
        let transposed = nl::ndarray([C_TILE_SIZE, tiles, T_TILE_SIZE], input_sbuf.dtype(), buffer = nl::sbuf);
        for t_tile_idx in 0..tiles {
            let psum = nl::ndarray([C_TILE_SIZE, T_TILE_SIZE], nl::float32, buffer = nl::psum);
            nisa::nc_matmul(psum, aligned[s![.., t_tile_idx, ..]], identity, is_transpose = true);
            nisa::tensor_copy(transposed[s![.., t_tile_idx, ..]], psum);
        }
        transposed
    }

    /// Writes the indices GpSimd core `column_idx` found in this chunk (read
    /// from partition `32·quadrant_idx` of `indices_sbuf`) to its output column
    /// at the column's running count, and adds the chunk's count to it.
    #[nki_helper]
    pub fn store_indices_and_count(
        dims: NonzeroDims,
        round: NonzeroRound,
        indices_sbuf: Sbuf,
        indices: Hbm,
        offsets: Sbuf,
        quadrant_idx: i64,
        column_idx: i64,
    ) {
        if column_idx < round.n_columns {
            let chunk = dims.chunk_size;
            let p = quadrant_idx * QUADRANT_SIZE;
            let offset_tile = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::tensor_copy(offset_tile, offsets[s![0..1, column_idx..column_idx + 1]]);
            let out_col = dims.c_offset + round.idx * NUM_GPSIMD_CORES + column_idx;
            let src_data = nl::ndarray([1, chunk], nl::int32, buffer = nl::sbuf);
            nisa::tensor_copy(src_data, indices_sbuf[s![p..p + 1, 0, 0..chunk]]);
            nisa::dma_copy(
                indices.ap([[dims.t_dim, 1], [1, chunk]], offset = out_col * dims.t_dim, scalar_offset = offset_tile, indirect_dim = 1),
                src_data,
            );
            let count_tile = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::tensor_copy(count_tile, indices_sbuf[s![p..p + 1, 0, chunk..chunk + 1]]);
            let running = offsets[s![0..1, column_idx..column_idx + 1]];
            nisa::tensor_tensor(running, running, count_tile, nl::add);
        }
    }

    /// Fills this program's rows of `indices` with -1 (needed when chunks write
    /// only up to their running counts).
    #[nki_helper]
    pub fn fill_padding(dims: NonzeroDims, indices: Hbm, programs: i64, program: i64) {
        let per_partition = dims.c_per_shard * dims.t_dim / T_TILE_SIZE;
        let init = nl::ndarray([T_TILE_SIZE, per_partition], indices.dtype(), buffer = nl::sbuf);
        nisa::memset(init, -1);
        let rows = indices.reshape([T_TILE_SIZE * programs, per_partition]);
        nisa::dma_copy(rows[s![T_TILE_SIZE * program..T_TILE_SIZE * (program + 1), ..]], init);
    }

    /// Searches one round's columns chunk by chunk, storing their indices and
    /// leaving their counts in `offsets` (`[1, 8]`).
    #[nki_helper]
    pub fn search_round(
        dims: NonzeroDims,
        round: NonzeroRound,
        input_tensor: Hbm,
        col_start: Option<Sbuf>,
        indices: Hbm,
        offsets: Sbuf,
        identity: Sbuf,
    ) {
        let chunk = dims.chunk_size;
        for chunk_idx in 0..dims.t_dim / chunk {
            let input_sbuf = load_chunk(dims, round, input_tensor, col_start, chunk_idx);
            let transposed = align_for_gpsimd(dims, round, input_sbuf, identity);
            let indices_sbuf = nl::ndarray([C_TILE_SIZE, 1, chunk + 1], nl::int32, buffer = nl::sbuf);
            nisa::nonzero_with_count(indices_sbuf, transposed, index_offset = chunk_idx * chunk, padding_val = -1);
            // Even cores sit on each quadrant's partition 0.
            for quadrant_idx in 0..NUM_QUADRANTS {
                let column_idx = quadrant_idx * GPSIMD_CORES_PER_QUADRANT;
                store_indices_and_count(dims, round, indices_sbuf, indices, offsets, quadrant_idx, column_idx);
            }
            // Odd cores sit on partition 16 of each quadrant: move it onto partition 0.
            let odd_core_mask: Vec<i64> = (0..QUADRANT_SIZE).map(|p| if p == 0 { PARTITIONS_PER_GPSIMD } else { SHUFFLE_KEEP }).collect();
            nisa::nc_stream_shuffle(indices_sbuf, indices_sbuf, odd_core_mask);
            for quadrant_idx in 0..NUM_QUADRANTS {
                let column_idx = quadrant_idx * GPSIMD_CORES_PER_QUADRANT + 1;
                store_indices_and_count(dims, round, indices_sbuf, indices, offsets, quadrant_idx, column_idx);
            }
        }
    }

    /// The nonzero positions of each column of `input_tensor` (`[T, C]`, float32
    /// or int32) along `T`, ascending and padded with -1 (`indices`, `[C, T]` in
    /// `index_dtype`), and their counts (`nonzero_counts`, `[C]` int32); with
    /// `col_start_id` (`[1]` int32) and `n_cols`, of columns `col_start_id ..
    /// col_start_id + n_cols` only (`[n_cols, T]`, `[n_cols]`). `chunk_size`
    /// (default `T`) bounds the tokens held in SBUF at once.
    #[nki_kernel]
    pub fn find_nonzero_indices(
        #[dtypes(float32, int32)] input_tensor: Hbm,
        #[dtypes(int32)] col_start_id: Option<Hbm>,
        n_cols: Option<i64>,
        chunk_size: Option<i64>,
        #[default(nl::int32)] index_dtype: Dtype,
    ) -> Outputs {
        let [t_dim, c_dim] = input_tensor.shape();
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let program = if grid { nl::program_id(0) } else { 0 };
        let chunk = chunk_size.unwrap_or(t_dim);
        // The rules of `find_nonzero_indices_violation`, checked when the kernel is traced.
        assert!(
            t_dim >= T_TILE_SIZE && t_dim % T_TILE_SIZE == 0,
            "find_nonzero_indices: T must be a positive multiple of 128, got T = {t_dim}"
        );
        assert!(
            chunk >= T_TILE_SIZE && chunk % T_TILE_SIZE == 0 && t_dim % chunk == 0,
            "find_nonzero_indices: chunk_size must be a positive multiple of 128 that divides T = {t_dim}, got chunk_size = {chunk}"
        );
        assert!(col_start_id.is_none() || n_cols.is_some(), "find_nonzero_indices: col_start_id needs n_cols");
        let c = if col_start_id.is_some() { n_cols.unwrap_or(0) } else { c_dim };
        assert!(c >= 1 && c <= c_dim, "find_nonzero_indices: n_cols must be within 1..=C = {c_dim}, got n_cols = {c}");
        assert!(
            c % programs == 0,
            "find_nonzero_indices: the searched columns must split evenly over the LNC programs, got {c} columns for {programs} programs"
        );
        assert!(
            index_dtype == nl::int32 || index_dtype == nl::float32,
            "find_nonzero_indices: index_dtype must be int32 or float32 (it holds -1), got {index_dtype}"
        );
        let col_start_sbuf = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        if let Some(ids) = col_start_id {
            nisa::dma_copy(col_start_sbuf, ids.reshape([1, 1]));
        }
        let col_start = if col_start_id.is_some() { Some(col_start_sbuf) } else { None };
        let c_per_shard = c / programs;
        let dims = NonzeroDims {
            t_dim,
            c_dim,
            c_per_shard,
            c_offset: c_per_shard * program,
            chunk_size: chunk,
            chunk_t_tiles: chunk / T_TILE_SIZE,
        };

        let indices = nl::ndarray([c, t_dim], index_dtype, buffer = nl::shared_hbm);
        if t_dim / chunk > 1 {
            fill_padding(dims, indices, programs, program);
        }
        let nonzero_counts = nl::ndarray([c], nl::int32, buffer = nl::shared_hbm);
        let counts_local = nl::ndarray([1, c_per_shard], nl::int32, buffer = nl::sbuf);
        nisa::memset(counts_local, 0);
        let identity = nl::shared_identity_matrix(C_TILE_SIZE, dtype = nl::float32);

        for round_idx in 0..c_per_shard.div_ceil(NUM_GPSIMD_CORES) {
            let first = round_idx * NUM_GPSIMD_CORES;
            let round = NonzeroRound {
                idx: round_idx,
                column_start: first + dims.c_offset,
                n_columns: (c_per_shard - first).min(NUM_GPSIMD_CORES),
            };
            let offsets = nl::ndarray([1, NUM_GPSIMD_CORES], nl::int32, buffer = nl::sbuf);
            nisa::memset(offsets, 0);
            search_round(dims, round, input_tensor, col_start, indices, offsets, identity);
            nisa::tensor_copy(counts_local[s![0..1, first..first + round.n_columns]], offsets[s![0..1, 0..round.n_columns]]);
        }
        let counts_row = nonzero_counts.reshape([1, c]);
        nisa::dma_copy(counts_row[s![0..1, dims.c_offset..dims.c_offset + c_per_shard]], counts_local);
        Outputs(indices, nonzero_counts)
    }
}
