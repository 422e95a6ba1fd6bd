//! The NKI library's `fine_grained_allgather`: each rank's `[m, K]` rows
//! gathered from every rank of its ring into one `[RANK_N, ..., K]` result in
//! rank order, by passing blocks around the ring with
//! `ncc.collective_permute_implicit` into two alternating buffers.
//!
//! A rank's rows are split into `LNC_N · CHANNEL_N` slices of
//! `local_M = m / (LNC_N · CHANNEL_N)` rows: each LNC program moves its own
//! slices, each over its own ring channel (two channels, four at 32 ranks on
//! trn1 and at 64 and 128 ranks; one without an LNC grid). At iteration `i` a
//! buffer holds the rows of the rank
//! `ncc.collective_permute_implicit_current_processing_rank_id(i)`, a
//! register, so the copy into the result lands at that rank's slot through a
//! run-time `scalar_offset`:
//!
//! ```text
//! buf0 = my rows                               # SBUF, transposed; or HBM
//! result[rank of iteration 0] = buf0
//! permute buf0 -> buf1; result[rank of iteration 1] = buf1
//! for step in 1 .. RANK_N / 2:
//!     permute buf1 -> buf0; result[rank of iteration 2·step] = buf0
//!     permute buf0 -> buf1; result[rank of iteration 2·step + 1] = buf1
//! ```
//!
//! Two paths, as in the library. When both buffers fit the 24 MiB SBUF budget
//! (and `force_hbm_cc` is off), the rows live in SBUF transposed, `K` on the
//! partitions: `[TILE_K, BLOCK_M]` tiles filled by `dma_transpose`, packed
//! into one flat `[TILE_K, CHANNEL_N·...]` buffer for the permute and
//! unpacked after it, and turned back by `nc_transpose` through PSUM on the
//! way to the result, whose layout is then `[RANK_N, LNC_N, CHANNEL_N,
//! local_M, K]`. Otherwise two shared HBM buffers of `[m, K]` travel and
//! `[TILE_M, TILE_K]` tiles are copied through SBUF into a result laid out
//! `[RANK_N, CHANNEL_N, LNC_N, local_M, K]`. Either way the result read
//! row-major is the `[RANK_N · m, K]` concatenation of the ranks' inputs.
//! The processing rank id is the rank's global id, and it picks one of the
//! result's `RANK_N` slots: with `num_groups > 1` the rings after the first
//! address slots past the result, and the copy is refused at run time, as the
//! library's is.
//!
//! Tiles are `TILE_M = min(local_M, 128)` rows (`nl.tile_size.gemm_stationary_fmax`)
//! by `TILE_K = min(K, 128)` columns (`nl.tile_size.pmax`); one block holds a
//! slice's tiles, except that the HBM path, when it was chosen for lack of
//! SBUF, caps a block at what the budget holds. Its last block then stops at
//! the slice's end, where the library's would copy whole blocks past it
//! (reading beyond the buffer unless the cap divides the slice's tiles).

pub use kernel::*;

/// Why a `fine_grained_allgather` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FineGrainedAllGatherRule {
    /// `tp_degree` is not a positive even number.
    TpDegree,
    /// `num_groups` is not positive.
    NumGroups,
    /// `M = m · tp_degree` is not divisible by `RANK_N · LNC_N · CHANNEL_N`.
    Rows,
    /// A slice's rows or `K` do not split into whole tiles.
    Tiles,
}

impl FineGrainedAllGatherRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            FineGrainedAllGatherRule::TpDegree => "fine_grained_allgather: tp_degree must be a positive even number",
            FineGrainedAllGatherRule::NumGroups => "fine_grained_allgather: num_groups must be positive",
            FineGrainedAllGatherRule::Rows => "fine_grained_allgather: M = m * tp_degree must be divisible by RANK_N * LNC_N * CHANNEL_N",
            FineGrainedAllGatherRule::Tiles => "fine_grained_allgather: local_M and K must each be at most 128 or a multiple of 128",
        }
    }
}

/// The ring channels each LNC program uses: one without an LNC grid; with two
/// programs two, four at 64 and 128 ranks and at 32 ranks before trn2
/// (`nc_version_3` is whether the target is NeuronCore-v3 or later).
pub const fn channel_count(tp_degree: i64, lnc: i64, nc_version_3: bool) -> i64 {
    if lnc != 2 {
        return 1;
    }
    match tp_degree {
        4 | 8 | 16 => 2,
        32 => {
            if nc_version_3 {
                2
            } else {
                4
            }
        }
        64 | 128 => 4,
        _ => 1,
    }
}

/// One `fine_grained_allgather` call, for [`fine_grained_allgather_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FineGrainedAllGatherShape {
    /// Rows `m` of each rank's input.
    pub m: i64,
    /// Columns `K`.
    pub k: i64,
    /// Ranks per ring.
    pub tp_degree: i64,
    /// Rings.
    pub num_groups: i64,
    /// LNC programs per rank.
    pub lnc: i64,
    /// Whether the target is NeuronCore-v3 (trn2) or later.
    pub nc_version_3: bool,
}

/// The first library rule a call breaks, or `None`.
pub const fn fine_grained_allgather_violation(c: FineGrainedAllGatherShape) -> Option<FineGrainedAllGatherRule> {
    if c.tp_degree < 2 || c.tp_degree % 2 != 0 {
        return Some(FineGrainedAllGatherRule::TpDegree);
    }
    if c.num_groups < 1 {
        return Some(FineGrainedAllGatherRule::NumGroups);
    }
    let slices = c.lnc * channel_count(c.tp_degree, c.lnc, c.nc_version_3);
    // M % (RANK_N * slices) == 0 with M = m * RANK_N.
    if c.m < 1 || c.lnc < 1 || c.m % slices != 0 {
        return Some(FineGrainedAllGatherRule::Rows);
    }
    let local_m = c.m / slices;
    if !whole_tiles(local_m) || c.k < 1 || !whole_tiles(c.k) {
        return Some(FineGrainedAllGatherRule::Tiles);
    }
    None
}

/// Whether `n` rows or columns split into whole tiles of `min(n, 128)`.
const fn whole_tiles(n: i64) -> bool {
    n <= TILE_MAX || n % TILE_MAX == 0
}

/// A call checked at compile time: the [`FineGrainedAllGatherShape`] of the
/// given sizes (one ring, LNC 2 on trn2 unless given), or a compile error
/// naming the rule it breaks.
///
/// ```
/// let c = nkilib::fine_grained_allgather_config!(m = 1024, k = 4096, tp_degree = 4);
/// assert_eq!(nkilib::experimental::collectives::fg_allgather::channel_count(c.tp_degree, c.lnc, c.nc_version_3), 2);
/// ```
///
/// ```compile_fail
/// // An odd ring cannot alternate its two buffers.
/// let c = nkilib::fine_grained_allgather_config!(m = 128, k = 128, tp_degree = 3);
/// ```
#[macro_export]
macro_rules! fine_grained_allgather_config {
    (m = $m:expr, k = $k:expr, tp_degree = $tp:expr $(, $field:ident = $value:expr)* $(,)?) => {
        $crate::__collective_config!(
            [$crate::experimental::collectives::fg_allgather::FineGrainedAllGatherShape],
            [$crate::experimental::collectives::fg_allgather::fine_grained_allgather_violation],
            { m: $m, k: $k, tp_degree: $tp, num_groups: 1, lnc: 2, nc_version_3: true },
            { $($field = $value),* }
        )
    };
}

/// The kernel with its tile constants and phase helpers.
#[nki::nki_module]
pub mod kernel {
    use crate::experimental::collectives::fgcc::{
        generate_replica_groups, launch_collective_permutes_hbm, launch_collective_permutes_sbuf,
    };
    use nki::prelude::*;

    /// Rows per tile at most: an `nc_transpose` output's partitions
    /// (`nl.tile_size.gemm_stationary_fmax`).
    pub const TILE_M_MAX: i64 = nl::tile_size::gemm_stationary_fmax;
    /// Columns per tile at most: the transposed tile's partitions (`nl.tile_size.pmax`).
    pub const TILE_MAX: i64 = nl::tile_size::pmax;
    /// SBUF bytes the two buffers may take together (24 MiB).
    pub const TOTAL_SBUF_BUDGET_BYTES: i64 = 25165824;

    /// Replica groups as a bundle field holds them: the rings' rank ids.
    pub type Groups = Vec<Vec<i64>>;

    /// The ring, this program's slices and their tiling.
    #[nki_object]
    pub struct FgTiling {
        /// The rings of `tp_degree` ranks.
        pub replica_groups: Groups,
        /// Ranks per ring.
        pub rank_n: i64,
        /// LNC programs per rank.
        pub lnc_n: i64,
        /// This program.
        pub lnc_id: i64,
        /// Ring channels per program.
        pub channel_n: i64,
        /// Rows per slice: `m / (LNC_N · CHANNEL_N)`.
        pub local_m: i64,
        /// Columns.
        pub k: i64,
        /// Rows per tile.
        pub tile_m: i64,
        /// Columns per tile.
        pub tile_k: i64,
        /// Row tiles per block.
        pub tiles_in_block_m: i64,
        /// Column tiles per block.
        pub tiles_in_block_k: i64,
        /// Rows per block.
        pub block_m: i64,
        /// Columns per block.
        pub block_k: i64,
        /// Row blocks per slice.
        pub num_block_m: i64,
        /// Column blocks.
        pub num_block_k: i64,
    }

    /// [`channel_count`](super::channel_count) when the kernel is traced.
    #[nki_helper]
    pub fn channels_per_program(tp_degree: i64, lnc_n: i64, nc_version_3: bool) -> i64 {
        let four = tp_degree == 64 || tp_degree == 128 || (tp_degree == 32 && !nc_version_3);
        let two = tp_degree == 4 || tp_degree == 8 || tp_degree == 16 || tp_degree == 32;
        let lnc2 = if four { 4 } else { if two { 2 } else { 1 } };
        let channel_n = if lnc_n == 2 { lnc2 } else { 1 };
        channel_n
    }

    /// This program's place on the ring: `(LNC_N, lnc_id, CHANNEL_N)`, one
    /// program without an LNC grid.
    #[nki_helper]
    pub fn ring_programs(tp_degree: i64) -> (i64, i64, i64) {
        let grid = nl::program_ndim() == 1;
        let lnc_n = if grid { nl::num_programs(0) } else { 1 };
        let lnc_id = if grid { nl::program_id(0) } else { 0 };
        let nc_version_3 = nisa::get_nc_version() >= nisa::nc_version::gen3;
        let channel_n: i64 = channels_per_program(tp_degree, lnc_n, nc_version_3);
        (lnc_n, lnc_id, channel_n)
    }

    /// The [`FgTiling`] of `num_groups` rings of `tp_degree` ranks, with this
    /// program's place `lnc_n, lnc_id, channel_n` from [`ring_programs`],
    /// slices of `local_m` rows by `k` columns and blocks of
    /// `tiles_in_block_m` by `tiles_in_block_k` tiles.
    #[nki_helper]
    pub fn ring_tiling(
        tp_degree: i64,
        num_groups: i64,
        lnc_n: i64,
        lnc_id: i64,
        channel_n: i64,
        local_m: i64,
        k: i64,
        tiles_in_block_m: i64,
        tiles_in_block_k: i64,
    ) -> FgTiling {
        let tile_m = local_m.min(TILE_M_MAX);
        let tile_k = k.min(TILE_MAX);
        let block_m = tile_m * tiles_in_block_m;
        let block_k = tile_k * tiles_in_block_k;
        FgTiling {
            replica_groups: generate_replica_groups(tp_degree, num_groups),
            rank_n: tp_degree,
            lnc_n,
            lnc_id,
            channel_n,
            local_m,
            k,
            tile_m,
            tile_k,
            tiles_in_block_m,
            tiles_in_block_k,
            block_m,
            block_k,
            num_block_m: local_m.div_ceil(block_m),
            num_block_k: k.div_ceil(block_k),
        }
    }

    /// The position of tile `(channel, k block, k tile, m block)` in the
    /// SBUF path's list of `[TILE_K, BLOCK_M]` tiles (the library's nesting
    /// `[channel][k][bk][m]`, flattened in that order).
    #[nki_helper]
    pub fn tile_slot(t: FgTiling, channel_idx: i64, k_block_idx: i64, k_tile_idx: i64, m_block_idx: i64) -> i64 {
        ((channel_idx * t.num_block_k + k_block_idx) * t.tiles_in_block_k + k_tile_idx) * t.num_block_m + m_block_idx
    }

    /// Writes a `[TILE_M, TILE_K]` SBUF tile at element `offset` of rank
    /// `numerator`'s slot of the result: the register scales the result's
    /// first dim at run time.
    #[nki_helper]
    pub fn store_rank_tile(result: Hbm, tile: Sbuf, numerator: Register, t: FgTiling, offset: i64) {
        nisa::dma_copy(result.ap([[t.k, t.tile_m], [1, t.tile_k]], offset = offset, scalar_offset = numerator, indirect_dim = 0), tile);
    }

    /// Copies the `[local_M, K]` slice at `buf_offset` of an HBM buffer tile by
    /// tile through SBUF into the result at `result_offset` in the slot of
    /// rank `numerator`. The tiles of a last block that would run past the
    /// slice are not copied (they hold no rows of it).
    #[nki_helper]
    pub fn copy_gathered_data_hbm(buf: Hbm, result: Hbm, numerator: Register, t: FgTiling, buf_offset: i64, result_offset: i64) {
        let k = t.k;
        for m_block_idx in 0..t.num_block_m {
            let tiles = t.tiles_in_block_m.min((t.local_m - m_block_idx * t.block_m) / t.tile_m);
            for m_tile_idx in 0..tiles {
                for k_block_idx in 0..t.num_block_k {
                    for k_tile_idx in 0..t.tiles_in_block_k {
                        let tile = nl::ndarray([t.tile_m, t.tile_k], buf.dtype(), buffer = nl::sbuf);
                        let at = (m_block_idx * t.block_m + m_tile_idx * t.tile_m) * k + k_block_idx * t.block_k + k_tile_idx * t.tile_k;
                        nisa::dma_copy(tile, buf.ap([[k, t.tile_m], [1, t.tile_k]], offset = buf_offset + at));
                        store_rank_tile(result, tile, numerator, t, result_offset + at);
                    }
                }
            }
        }
    }

    /// Copies channel `channel_idx`'s transposed tiles back to rows, through
    /// `nc_transpose` into PSUM, into the result at `result_offset` in the
    /// slot of rank `numerator`.
    #[nki_helper]
    pub fn copy_gathered_data_sbuf(
        lhs_buf: Vec<Sbuf>,
        result: Hbm,
        numerator: Register,
        channel_idx: i64,
        t: FgTiling,
        result_offset: i64,
    ) {
        let k = t.k;
        for k_block_idx in 0..t.num_block_k {
            for m_block_idx in 0..t.num_block_m {
                for m_tile_idx in 0..t.tiles_in_block_m {
                    for k_tile_idx in 0..t.tiles_in_block_k {
                        let slot: i64 = tile_slot(t, channel_idx, k_block_idx, k_tile_idx, m_block_idx);
                        let held = lhs_buf[slot];
                        let sub_tile = held[s![.., m_tile_idx * t.tile_m..(m_tile_idx + 1) * t.tile_m]];
                        let psum_tile = nl::ndarray([t.tile_m, t.tile_k], result.dtype(), buffer = nl::psum);
                        nisa::nc_transpose(psum_tile, sub_tile);
                        let sbuf_tile = nl::ndarray([t.tile_m, t.tile_k], result.dtype(), buffer = nl::sbuf);
                        nisa::tensor_copy(sbuf_tile, psum_tile);
                        let at = (m_block_idx * t.block_m + m_tile_idx * t.tile_m) * k + k_block_idx * t.block_k + k_tile_idx * t.tile_k;
                        store_rank_tile(result, sbuf_tile, numerator, t, result_offset + at);
                    }
                }
            }
        }
    }

    /// Copies every `[TILE_K, BLOCK_M]` tile into its columns of the flat
    /// buffer the permute sends.
    #[nki_helper]
    pub fn pack_nested_to_flat(nested: Vec<Sbuf>, flat: Sbuf, t: FgTiling) {
        for slot in 0..nested.len() {
            nisa::tensor_copy(flat[s![.., slot * t.block_m..(slot + 1) * t.block_m]], nested[slot]);
        }
    }

    /// Copies the flat buffer a permute filled back into its tiles.
    #[nki_helper]
    pub fn unpack_flat_to_nested(flat: Sbuf, nested: Vec<Sbuf>, t: FgTiling) {
        for slot in 0..nested.len() {
            nisa::tensor_copy(nested[slot], flat[s![.., slot * t.block_m..(slot + 1) * t.block_m]]);
        }
    }

    /// The rank whose rows channel `channel_idx` holds at ring iteration
    /// `iteration_id`, as a register.
    #[nki_helper]
    pub fn processing_rank(t: FgTiling, iteration_id: i64, channel_idx: i64) -> Register {
        ncc::collective_permute_implicit_current_processing_rank_id(
            iteration_id,
            ncc::ReplicaGroup(t.replica_groups),
            channel_id = channel_idx,
        )
    }

    /// Writes the rows the SBUF tiles hold at ring iteration `iteration_id`
    /// into the result, channel by channel.
    #[nki_helper]
    pub fn copy_iteration_sbuf(nested: Vec<Sbuf>, result: Hbm, iteration_id: i64, t: FgTiling) {
        let result_slice_size = t.local_m * t.k;
        for channel_idx in 0..t.channel_n {
            let numerator: Register = processing_rank(t, iteration_id, channel_idx);
            let result_offset = (t.lnc_id * t.channel_n + channel_idx) * result_slice_size;
            copy_gathered_data_sbuf(nested, result, numerator, channel_idx, t, result_offset);
        }
    }

    /// Writes the rows an HBM buffer holds at ring iteration `iteration_id`
    /// into the result, channel by channel.
    #[nki_helper]
    pub fn copy_iteration_hbm(buf: Hbm, result: Hbm, iteration_id: i64, t: FgTiling) {
        let slice_size = t.local_m * t.k;
        for channel_idx in 0..t.channel_n {
            let numerator: Register = processing_rank(t, iteration_id, channel_idx);
            let offset = (channel_idx * t.lnc_n + t.lnc_id) * slice_size;
            copy_gathered_data_hbm(buf, result, numerator, t, offset, offset);
        }
    }

    /// One permute of the SBUF path: pack `src`'s tiles, send them, unpack
    /// what arrived into `dst`'s tiles.
    #[nki_helper]
    pub fn permute_sbuf(src: Vec<Sbuf>, src_flat: Sbuf, dst: Vec<Sbuf>, dst_flat: Sbuf, t: FgTiling) {
        pack_nested_to_flat(src, src_flat, t);
        launch_collective_permutes_sbuf(src_flat, dst_flat, t.replica_groups, t.channel_n);
        unpack_flat_to_nested(dst_flat, dst, t);
    }

    /// One ring step of the SBUF path: `src`'s tiles sent into `dst`'s, whose
    /// rows (ring iteration `iteration_id`) then go to the result.
    #[nki_helper]
    pub fn gather_step_sbuf(src: Vec<Sbuf>, src_flat: Sbuf, dst: Vec<Sbuf>, dst_flat: Sbuf, result: Hbm, iteration_id: i64, t: FgTiling) {
        permute_sbuf(src, src_flat, dst, dst_flat, t);
        copy_iteration_sbuf(dst, result, iteration_id, t);
    }

    /// One ring step of the HBM path: `src` sent into `dst`, whose rows (ring
    /// iteration `iteration_id`) then go to the result.
    #[nki_helper]
    pub fn gather_step_hbm(src: Hbm, dst: Hbm, result: Hbm, iteration_id: i64, t: FgTiling) {
        launch_collective_permutes_hbm(src, dst, t.replica_groups, t.channel_n, t.lnc_n);
        copy_iteration_hbm(dst, result, iteration_id, t);
    }

    /// Transposes this program's slices of `lhs` into their `[TILE_K,
    /// BLOCK_M]` tiles by `dma_transpose`.
    #[nki_helper]
    pub fn load_transposed_slices(lhs: Hbm, buf0: Vec<Sbuf>, t: FgTiling) {
        let k = t.k;
        for channel_idx in 0..t.channel_n {
            for k_block_idx in 0..t.num_block_k {
                for k_tile_idx in 0..t.tiles_in_block_k {
                    for m_block_idx in 0..t.num_block_m {
                        let row_start = m_block_idx * t.block_m;
                        let col_start = (k_block_idx * t.tiles_in_block_k + k_tile_idx) * t.tile_k;
                        let src_offset = ((t.lnc_id * t.channel_n + channel_idx) * t.local_m + row_start) * k + col_start;
                        let slot: i64 = tile_slot(t, channel_idx, k_block_idx, k_tile_idx, m_block_idx);
                        let tile = buf0[slot];
                        nisa::dma_transpose(
                            tile.ap([[t.block_m, t.tile_k], [1, 1], [1, 1], [1, t.block_m]]),
                            lhs.ap([[k, t.block_m], [1, 1], [1, 1], [1, t.tile_k]], offset = src_offset),
                        );
                    }
                }
            }
        }
    }

    /// Copies this program's slices of `lhs` into the same rows of the HBM
    /// buffer `buf0`.
    #[nki_helper]
    pub fn copy_local_rows(lhs: Hbm, buf0: Hbm, t: FgTiling) {
        let k = t.k;
        let slice_size = t.local_m * k;
        for channel_idx in 0..t.channel_n {
            let offset = (channel_idx * t.lnc_n + t.lnc_id) * slice_size;
            nisa::dma_copy(buf0.ap([[k, t.local_m], [1, k]], offset = offset), lhs.ap([[k, t.local_m], [1, k]], offset = offset));
        }
    }

    /// The SBUF path: this program's slices transposed into `[TILE_K,
    /// BLOCK_M]` tiles, sent around the ring in two flat buffers, and written
    /// back as rows into `result` (`[RANK_N, LNC_N, CHANNEL_N, local_M, K]`).
    #[nki_helper]
    pub fn run_sbuf_path(lhs: Hbm, result: Hbm, t: FgTiling) {
        let tiles = t.channel_n * t.num_block_k * t.tiles_in_block_k * t.num_block_m;
        let dtype = lhs.dtype();
        let buf0: Vec<Sbuf> = (0..tiles).map(|_| nl::ndarray([t.tile_k, t.block_m], dtype, buffer = nl::sbuf)).collect();
        let buf1: Vec<Sbuf> = (0..tiles).map(|_| nl::ndarray([t.tile_k, t.block_m], dtype, buffer = nl::sbuf)).collect();
        load_transposed_slices(lhs, buf0, t);
        let flat_size = tiles * t.block_m;
        let buf0_flat = nl::ndarray([t.tile_k, flat_size], dtype, buffer = nl::sbuf);
        let buf1_flat = nl::ndarray([t.tile_k, flat_size], dtype, buffer = nl::sbuf);

        copy_iteration_sbuf(buf0, result, 0, t);
        gather_step_sbuf(buf0, buf0_flat, buf1, buf1_flat, result, 1, t);
        for step_idx in nl::sequential_range(1, t.rank_n / 2) {
            gather_step_sbuf(buf1, buf1_flat, buf0, buf0_flat, result, 2 * step_idx, t);
            gather_step_sbuf(buf0, buf0_flat, buf1, buf1_flat, result, 2 * step_idx + 1, t);
        }
    }

    /// The HBM path: this program's slices copied into the first of two shared
    /// HBM buffers (`[m, K]`), sent around the ring, and copied tile by tile
    /// into `result` (`[RANK_N, CHANNEL_N, LNC_N, local_M, K]`).
    #[nki_helper]
    pub fn run_hbm_path(lhs: Hbm, result: Hbm, t: FgTiling) {
        let k = t.k;
        let [rows, _] = lhs.shape();
        let buf0 = nl::ndarray([rows, k], lhs.dtype(), buffer = nl::shared_hbm, name = "fg_buf0");
        let buf1 = nl::ndarray([rows, k], lhs.dtype(), buffer = nl::shared_hbm, name = "fg_buf1");
        copy_local_rows(lhs, buf0, t);
        copy_iteration_hbm(buf0, result, 0, t);
        gather_step_hbm(buf0, buf1, result, 1, t);
        for step_idx in nl::sequential_range(1, t.rank_n / 2) {
            gather_step_hbm(buf1, buf0, result, 2 * step_idx, t);
            gather_step_hbm(buf0, buf1, result, 2 * step_idx + 1, t);
        }
    }

    /// All-gathers each rank's `[m, K]` rows (`lhs`) over rings of `tp_degree`
    /// ranks (`num_groups` rings of consecutive ranks), returning the shared
    /// `[RANK_N, LNC_N, CHANNEL_N, local_M, K]` (SBUF path) or `[RANK_N,
    /// CHANNEL_N, LNC_N, local_M, K]` (HBM path, or `force_hbm_cc`) result.
    #[nki_kernel]
    pub fn fine_grained_allgather(
        #[dtypes(float32, bfloat16, float16)] lhs: Hbm,
        tp_degree: i64,
        num_groups: i64,
        #[default(false)] force_hbm_cc: bool,
    ) -> Hbm {
        let [m, k] = lhs.shape();
        let rank_n = tp_degree;
        let (lnc_n, lnc_id, channel_n): (i64, i64, i64) = ring_programs(tp_degree);
        // The rules of `fine_grained_allgather_violation`, checked when the kernel is traced.
        assert!(
            rank_n >= 2 && rank_n % 2 == 0,
            "fine_grained_allgather: tp_degree must be a positive even number, got tp_degree = {rank_n}"
        );
        assert!(num_groups >= 1, "fine_grained_allgather: num_groups must be positive, got num_groups = {num_groups}");
        assert!(
            m % (lnc_n * channel_n) == 0,
            "fine_grained_allgather: M = m * tp_degree must be divisible by RANK_N * LNC_N * CHANNEL_N, got m = {m}, RANK_N = {rank_n}, LNC_N = {lnc_n}, CHANNEL_N = {channel_n}"
        );
        let local_m = m / lnc_n / channel_n;
        assert!(
            (local_m <= TILE_MAX || local_m % TILE_MAX == 0) && (k <= TILE_MAX || k % TILE_MAX == 0),
            "fine_grained_allgather: local_M and K must each be at most 128 or a multiple of 128, got local_M = {local_m}, K = {k}"
        );
        let dtype_size = if lhs.dtype() == nl::float32 { 4 } else { 2 };
        let tile_m = local_m.min(TILE_M_MAX);
        let tile_k = k.min(TILE_MAX);
        let tiles_in_block_k = k.div_ceil(tile_k);
        let block_k = tile_k * tiles_in_block_k;
        let all_tiles_m = local_m.div_ceil(tile_m);
        // Both buffers in SBUF: with several channels, the flat buffer's
        // `TILE_K` partitions times every tile's `BLOCK_M` columns.
        let sbuf_per_buffer = if lnc_n == 2 && channel_n > 1 {
            tile_k * channel_n * tiles_in_block_k * tile_m * all_tiles_m * dtype_size
        } else {
            m * k * dtype_size
        };
        let lhs_in_sbuf = !force_hbm_cc && 2 * sbuf_per_buffer <= TOTAL_SBUF_BUDGET_BYTES;
        // The HBM path chosen for lack of SBUF stages blocks of what the budget holds.
        let tiles_in_block_m = if lhs_in_sbuf || force_hbm_cc {
            all_tiles_m
        } else {
            all_tiles_m.min(TOTAL_SBUF_BUDGET_BYTES / block_k / tile_m / dtype_size).max(1)
        };
        let t: FgTiling = ring_tiling(tp_degree, num_groups, lnc_n, lnc_id, channel_n, local_m, k, tiles_in_block_m, tiles_in_block_k);
        let result = if lhs_in_sbuf {
            nl::ndarray([rank_n, lnc_n, channel_n, local_m, k], lhs.dtype(), buffer = nl::shared_hbm, name = "result_sbuf")
        } else {
            nl::ndarray([rank_n, channel_n, lnc_n, local_m, k], lhs.dtype(), buffer = nl::shared_hbm, name = "result_hbm")
        };
        if lhs_in_sbuf {
            run_sbuf_path(lhs, result, t);
        } else {
            run_hbm_path(lhs, result, t);
        }
        result
    }
}
