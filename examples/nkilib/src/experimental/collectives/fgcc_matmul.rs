//! The NKI library's `allgather_compute_matmul` (`experimental/collectives/fgcc.py`):
//! each rank's `[m, K]` rows of `lhs` all-gathered over its ring and multiplied
//! by the rank's own `[K, N]` `rhs` (a column shard), the matmul of each ring
//! step overlapping the permute of the next. Every rank ends with the
//! `[RANK_N · m, N]` product of the gathered rows and its `rhs`.
//!
//! The ring is [`fine_grained_allgather`](super::fg_allgather)'s: a rank's rows
//! split into `LNC_N · CHANNEL_N` slices of `local_M` rows, each LNC program
//! moving its own slices over its channels between two alternating buffers.
//! Instead of copying what arrives, each iteration multiplies it:
//!
//! ```text
//! buf0 = my rows
//! result[rank of iteration 0] = buf0 @ rhs
//! permute buf0 -> buf1; result[rank of iteration 1] = buf1 @ rhs
//! for step in 1 .. RANK_N / 2:
//!     permute buf1 -> buf0; result[rank of iteration 2·step] = buf0 @ rhs
//!     permute buf0 -> buf1; result[rank of iteration 2·step + 1] = buf1 @ rhs
//! ```
//!
//! The rank an iteration processes is a register, so each result tile lands
//! in that rank's slot through a run-time `scalar_offset`.
//!
//! Operands: `rhs` is loaded into SBUF once as `[TILE_K, BLOCK_N]` tiles when
//! two copies of it fit 16 MiB, else streamed per block of at most
//! `16 / dtype bytes` K tiles and the N tiles 16 MiB holds. The rows travel in
//! SBUF, transposed into `[TILE_K, BLOCK_M]` tiles packed into one flat buffer
//! per permute, when two copies of a slice fit what is left of 24 MiB and
//! `force_hbm_cc` is off; the result is then `[RANK_N, LNC_N, CHANNEL_N,
//! local_M, N]`. Otherwise two shared HBM buffers of `[m, K]` travel, each
//! block transposed by `dma_transpose` when it is multiplied, and the result
//! is `[RANK_N, CHANNEL_N, LNC_N, local_M, N]`. Either way it read row-major
//! is the `[RANK_N · m, N]` product.
//!
//! Tiling: `TILE_M = min(local_M, 128)` (`gemm_stationary_fmax`),
//! `TILE_K = min(K, 128)` (`pmax`), `TILE_N = min(N, 512)` (`gemm_moving_fmax`).
//! For each N block, float32 accumulators for every `[TILE_M, TILE_N]` tile of
//! the slice are zeroed; each K block's `TILE_K` tiles accumulate in PSUM and
//! are added to them; then they are written out (cast to the input dtype).
//! Where the SBUF budget caps the HBM path's row blocks, the last block stops
//! at the slice's end (the library's would run past it). Where `rhs` is
//! streamed and the rows travel in SBUF, every K block of the rows is
//! transposed and sent: the library counts its K blocks before capping them,
//! so it holds only the first and fails indexing the next.

pub use kernel::*;

use super::fg_allgather::TILE_MAX;

/// Why an `allgather_compute_matmul` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllGatherMatmulRule {
    /// `tp_degree` is not a positive even number.
    TpDegree,
    /// `num_groups` is not positive.
    NumGroups,
    /// `lhs` and `rhs` disagree on `K`.
    Contraction,
    /// `M = m · tp_degree` is not divisible by `RANK_N · LNC_N · CHANNEL_N`.
    Rows,
    /// A slice's rows, `K` or `N` do not split into whole tiles.
    Tiles,
    /// `rhs` is streamed and its blocks do not split `K` or `N` evenly.
    Blocks,
}

impl AllGatherMatmulRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            AllGatherMatmulRule::TpDegree => "allgather_compute_matmul: tp_degree must be a positive even number",
            AllGatherMatmulRule::NumGroups => "allgather_compute_matmul: num_groups must be positive",
            AllGatherMatmulRule::Contraction => "allgather_compute_matmul: lhs K dimension must match rhs K dimension",
            AllGatherMatmulRule::Rows => "allgather_compute_matmul: M = m * tp_degree must be divisible by RANK_N * LNC_N * CHANNEL_N",
            AllGatherMatmulRule::Tiles => {
                "allgather_compute_matmul: local_M and K must each be at most 128 or a multiple of 128, N at most 512 or a multiple of 512"
            }
            AllGatherMatmulRule::Blocks => {
                "allgather_compute_matmul: when rhs does not fit SBUF twice, its K and N blocks must divide K and N"
            }
        }
    }
}

/// One `allgather_compute_matmul` call, for [`allgather_compute_matmul_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllGatherMatmulShape {
    /// Rows `m` of each rank's `lhs`.
    pub m: i64,
    /// Columns `K` of `lhs`.
    pub k: i64,
    /// Rows of `rhs`.
    pub k_rhs: i64,
    /// Columns `N` of `rhs`.
    pub n: i64,
    /// Bytes per element (4 for fp32, 2 for bf16/fp16).
    pub dtype_bytes: i64,
    /// Ranks per ring.
    pub tp_degree: i64,
    /// Rings.
    pub num_groups: i64,
    /// LNC programs per rank.
    pub lnc: i64,
    /// Whether the target is NeuronCore-v3 (trn2) or later.
    pub nc_version_3: bool,
}

/// Whether `n` splits into whole tiles of `min(n, max)`.
const fn whole_tiles(n: i64, max: i64) -> bool {
    n >= 1 && (n <= max || n % max == 0)
}

/// The first library rule a call breaks, or `None`.
pub const fn allgather_compute_matmul_violation(c: AllGatherMatmulShape) -> Option<AllGatherMatmulRule> {
    if c.tp_degree < 2 || c.tp_degree % 2 != 0 {
        return Some(AllGatherMatmulRule::TpDegree);
    }
    if c.num_groups < 1 {
        return Some(AllGatherMatmulRule::NumGroups);
    }
    if c.k != c.k_rhs {
        return Some(AllGatherMatmulRule::Contraction);
    }
    let slices = c.lnc * super::fg_allgather::channel_count(c.tp_degree, c.lnc, c.nc_version_3);
    if c.m < 1 || c.lnc < 1 || c.m % slices != 0 {
        return Some(AllGatherMatmulRule::Rows);
    }
    if !whole_tiles(c.m / slices, TILE_MAX) || !whole_tiles(c.k, TILE_MAX) || !whole_tiles(c.n, TILE_N_MAX) {
        return Some(AllGatherMatmulRule::Tiles);
    }
    if c.dtype_bytes < 1 || c.dtype_bytes > 4 {
        return Some(AllGatherMatmulRule::Tiles);
    }
    if 2 * c.k * c.n * c.dtype_bytes > RHS_SBUF_BUDGET_BYTES {
        let tile_k = if c.k < TILE_MAX { c.k } else { TILE_MAX };
        let tile_n = if c.n < TILE_N_MAX { c.n } else { TILE_N_MAX };
        let k_tiles = c.k / tile_k;
        let k_cap = 16 / c.dtype_bytes;
        let block_k = tile_k * if k_tiles < k_cap { k_tiles } else { k_cap };
        let n_tiles = c.n / tile_n;
        let n_cap = RHS_SBUF_BUDGET_BYTES / c.k / tile_n / c.dtype_bytes;
        let block_n = tile_n * if n_tiles < n_cap { n_tiles } else { n_cap };
        if block_n == 0 || c.k % block_k != 0 || c.n % block_n != 0 {
            return Some(AllGatherMatmulRule::Blocks);
        }
    }
    None
}

/// A call checked at compile time: the [`AllGatherMatmulShape`] of the given
/// sizes (one ring, bf16, LNC 2 on trn2 unless given), or a compile error
/// naming the rule it breaks.
///
/// ```
/// let c = nkilib::allgather_compute_matmul_config!(m = 1024, k = 4096, n = 1024, tp_degree = 4);
/// assert_eq!(c.k_rhs, 4096);
/// ```
///
/// ```compile_fail
/// // An odd ring cannot alternate its two buffers.
/// let c = nkilib::allgather_compute_matmul_config!(m = 128, k = 128, n = 128, tp_degree = 3);
/// ```
#[macro_export]
macro_rules! allgather_compute_matmul_config {
    (m = $m:expr, k = $k:expr, n = $n:expr, tp_degree = $tp:expr $(, $field:ident = $value:expr)* $(,)?) => {
        $crate::__collective_config!(
            [$crate::experimental::collectives::fgcc_matmul::AllGatherMatmulShape],
            [$crate::experimental::collectives::fgcc_matmul::allgather_compute_matmul_violation],
            { m: $m, k: $k, k_rhs: $k, n: $n, dtype_bytes: 2, tp_degree: $tp, num_groups: 1, lnc: 2, nc_version_3: true },
            { $($field = $value),* }
        )
    };
}

/// The kernel with its tile constants and phase helpers.
#[nki::nki_module]
pub mod kernel {
    use crate::experimental::collectives::fg_allgather::{
        FgTiling, TILE_M_MAX, TILE_MAX, TOTAL_SBUF_BUDGET_BYTES, copy_local_rows, load_transposed_slices, permute_sbuf, processing_rank,
        ring_programs, ring_tiling, tile_slot,
    };
    use crate::experimental::collectives::fgcc::launch_collective_permutes_hbm;
    use nki::prelude::*;

    /// Columns per output tile at most: one matmul's moving free size
    /// (`nl.tile_size.gemm_moving_fmax`).
    pub const TILE_N_MAX: i64 = nl::tile_size::gemm_moving_fmax;
    /// SBUF bytes the two copies of `rhs` may take (16 MiB).
    pub const RHS_SBUF_BUDGET_BYTES: i64 = 16777216;

    /// The `N` side of the matmul and where its operands live.
    #[nki_object]
    pub struct MatmulTiling {
        /// Columns of `rhs` and the result.
        pub n: i64,
        /// Columns per output tile.
        pub tile_n: i64,
        /// Column tiles per block.
        pub tiles_in_block_n: i64,
        /// Columns per block.
        pub block_n: i64,
        /// Column blocks.
        pub num_block_n: i64,
        /// Whether `rhs` is held in SBUF whole.
        pub rhs_in_sbuf: bool,
        /// Whether the rows travel in SBUF (else in HBM).
        pub lhs_in_sbuf: bool,
    }

    /// The position of `rhs` tile `(k block, k tile, n block)` in the list
    /// of `[TILE_K, BLOCK_N]` tiles held in SBUF.
    #[nki_helper]
    pub fn rhs_slot(t: FgTiling, nt: MatmulTiling, k_block_idx: i64, k_tile_idx: i64, n_block_idx: i64) -> i64 {
        (k_block_idx * t.tiles_in_block_k + k_tile_idx) * nt.num_block_n + n_block_idx
    }

    /// Loads `rhs` tile `(k block, k tile, n block)` from HBM into `tile`.
    #[nki_helper]
    pub fn load_rhs_tile(rhs: Hbm, tile: Sbuf, t: FgTiling, nt: MatmulTiling, k_block_idx: i64, k_tile_idx: i64, n_block_idx: i64) {
        let row = (k_block_idx * t.tiles_in_block_k + k_tile_idx) * t.tile_k;
        let col = n_block_idx * nt.block_n;
        nisa::dma_copy(tile, rhs.ap([[nt.n, t.tile_k], [1, nt.block_n]], offset = row * nt.n + col));
    }

    /// `rhs` tile `(k block, k tile, n block)`: the SBUF copy when `rhs` is
    /// held whole, else a freshly loaded one.
    #[nki_helper]
    pub fn rhs_tile(
        rhs: Hbm,
        rhs_tiles: Vec<Sbuf>,
        t: FgTiling,
        nt: MatmulTiling,
        k_block_idx: i64,
        k_tile_idx: i64,
        n_block_idx: i64,
    ) -> Sbuf {
        let slot: i64 = rhs_slot(t, nt, k_block_idx, k_tile_idx, n_block_idx);
        let tile = if nt.rhs_in_sbuf { rhs_tiles[slot] } else { nl::ndarray([t.tile_k, nt.block_n], rhs.dtype(), buffer = nl::sbuf) };
        if !nt.rhs_in_sbuf {
            load_rhs_tile(rhs, tile, t, nt, k_block_idx, k_tile_idx, n_block_idx);
        }
        tile
    }

    /// Transposed row tile `(k block, k tile, m block)` of channel
    /// `channel_idx` (`[TILE_K, BLOCK_M]`): the SBUF tile that travelled, or
    /// `dma_transpose`d from the HBM buffer's slice at `lhs_offset`.
    #[nki_helper]
    pub fn lhs_tile(
        lhs_tiles: Vec<Sbuf>,
        lhs_hbm: Hbm,
        lhs_offset: i64,
        channel_idx: i64,
        t: FgTiling,
        nt: MatmulTiling,
        k_block_idx: i64,
        k_tile_idx: i64,
        m_block_idx: i64,
    ) -> Sbuf {
        let slot: i64 = tile_slot(t, channel_idx, k_block_idx, k_tile_idx, m_block_idx);
        let tile = if nt.lhs_in_sbuf { lhs_tiles[slot] } else { nl::ndarray([t.tile_k, t.block_m], lhs_hbm.dtype(), buffer = nl::sbuf) };
        if !nt.lhs_in_sbuf {
            let rows = t.block_m.min(t.local_m - m_block_idx * t.block_m);
            let col = (k_block_idx * t.tiles_in_block_k + k_tile_idx) * t.tile_k;
            let at = lhs_offset + m_block_idx * t.block_m * t.k + col;
            nisa::dma_transpose(
                tile.ap([[t.block_m, t.tile_k], [1, 1], [1, 1], [1, rows]]),
                lhs_hbm.ap([[t.k, rows], [1, 1], [1, 1], [1, t.tile_k]], offset = at),
            );
        }
        tile
    }

    /// Adds one K block's products to the float32 accumulators of one M
    /// block (`[TILE_M, TILE_N]` tiles, M tile major): each output tile's
    /// `TILE_K` matmuls accumulate in PSUM, then join the accumulator.
    #[nki_helper]
    pub fn accumulate_block(stat: Vec<Sbuf>, mov: Vec<Sbuf>, acc: Vec<Sbuf>, m_tiles: i64, t: FgTiling, nt: MatmulTiling) {
        for n_tile_idx in 0..nt.tiles_in_block_n {
            for m_tile_idx in 0..m_tiles {
                let res_psum = nl::ndarray([t.tile_m, nt.tile_n], nl::float32, buffer = nl::psum);
                for k_tile_idx in 0..t.tiles_in_block_k {
                    let lhs_t = stat[k_tile_idx];
                    let rhs_t = mov[k_tile_idx];
                    nisa::nc_matmul(
                        res_psum,
                        lhs_t[s![.., m_tile_idx * t.tile_m..(m_tile_idx + 1) * t.tile_m]],
                        rhs_t[s![.., n_tile_idx * nt.tile_n..(n_tile_idx + 1) * nt.tile_n]],
                    );
                }
                let res_sb = nl::ndarray([t.tile_m, nt.tile_n], nl::float32, buffer = nl::sbuf);
                nisa::tensor_copy(res_sb, res_psum);
                let held = acc[m_tile_idx * nt.tiles_in_block_n + n_tile_idx];
                nisa::tensor_tensor(held, held, res_sb, nl::add);
            }
        }
    }

    /// Multiplies channel `channel_idx`'s slice (this ring iteration's rows)
    /// by `rhs` and writes it into the slot of rank `numerator` of `result`.
    #[nki_helper]
    pub fn compute_matmul(
        lhs_tiles: Vec<Sbuf>,
        lhs_hbm: Hbm,
        rhs: Hbm,
        rhs_tiles: Vec<Sbuf>,
        result: Hbm,
        numerator: Register,
        channel_idx: i64,
        t: FgTiling,
        nt: MatmulTiling,
    ) {
        // The slice's position among this rank's LNC_N · CHANNEL_N slices, in
        // the order of the path's layout.
        let slice_idx = if nt.lhs_in_sbuf { t.lnc_id * t.channel_n + channel_idx } else { channel_idx * t.lnc_n + t.lnc_id };
        let lhs_offset = slice_idx * t.local_m * t.k;
        let result_offset = slice_idx * t.local_m * nt.n;
        for n_block_idx in 0..nt.num_block_n {
            for m_block_idx in 0..t.num_block_m {
                let m_tiles = t.tiles_in_block_m.min((t.local_m - m_block_idx * t.block_m) / t.tile_m);
                let acc: Vec<Sbuf> = (0..m_tiles * nt.tiles_in_block_n)
                    .map(|_| nl::ndarray([t.tile_m, nt.tile_n], nl::float32, buffer = nl::sbuf))
                    .collect();
                for acc_idx in 0..acc.len() {
                    nisa::memset(acc[acc_idx], 0.0);
                }
                for k_block_idx in nl::sequential_range(0, t.num_block_k) {
                    let mov: Vec<Sbuf> = (0..t.tiles_in_block_k)
                        .map(|k_tile_idx| rhs_tile(rhs, rhs_tiles, t, nt, k_block_idx, k_tile_idx, n_block_idx))
                        .collect();
                    let stat: Vec<Sbuf> = (0..t.tiles_in_block_k)
                        .map(|k_tile_idx| {
                            lhs_tile(lhs_tiles, lhs_hbm, lhs_offset, channel_idx, t, nt, k_block_idx, k_tile_idx, m_block_idx)
                        })
                        .collect();
                    accumulate_block(stat, mov, acc, m_tiles, t, nt);
                }
                for m_tile_idx in 0..m_tiles {
                    for n_tile_idx in 0..nt.tiles_in_block_n {
                        let row = m_block_idx * t.block_m + m_tile_idx * t.tile_m;
                        let col = n_block_idx * nt.block_n + n_tile_idx * nt.tile_n;
                        nisa::dma_copy(
                            result.ap(
                                [[nt.n, t.tile_m], [1, nt.tile_n]],
                                offset = result_offset + row * nt.n + col,
                                scalar_offset = numerator,
                                indirect_dim = 0,
                            ),
                            acc[m_tile_idx * nt.tiles_in_block_n + n_tile_idx],
                        );
                    }
                }
            }
        }
    }

    /// Multiplies the rows every channel holds at ring iteration
    /// `iteration_id` into the result.
    #[nki_helper]
    pub fn compute_iteration(
        lhs_tiles: Vec<Sbuf>,
        lhs_hbm: Hbm,
        rhs: Hbm,
        rhs_tiles: Vec<Sbuf>,
        result: Hbm,
        iteration_id: i64,
        t: FgTiling,
        nt: MatmulTiling,
    ) {
        for channel_idx in 0..t.channel_n {
            let numerator: Register = processing_rank(t, iteration_id, channel_idx);
            compute_matmul(lhs_tiles, lhs_hbm, rhs, rhs_tiles, result, numerator, channel_idx, t, nt);
        }
    }

    /// One ring step of the SBUF path: `src`'s tiles sent into `dst`'s, whose
    /// rows (ring iteration `iteration_id`) are then multiplied into the result.
    #[nki_helper]
    pub fn compute_step_sbuf(
        iteration_id: i64,
        src: Vec<Sbuf>,
        src_flat: Sbuf,
        dst: Vec<Sbuf>,
        dst_flat: Sbuf,
        lhs: Hbm,
        result: Hbm,
        rhs: Hbm,
        rhs_tiles: Vec<Sbuf>,
        t: FgTiling,
        nt: MatmulTiling,
    ) {
        permute_sbuf(src, src_flat, dst, dst_flat, t);
        compute_iteration(dst, lhs, rhs, rhs_tiles, result, iteration_id, t, nt);
    }

    /// One ring step of the HBM path: `src` sent into `dst`, whose rows (ring
    /// iteration `iteration_id`) are then multiplied into the result.
    #[nki_helper]
    pub fn compute_step_hbm(
        iteration_id: i64,
        src: Hbm,
        dst: Hbm,
        no_tiles: Vec<Sbuf>,
        result: Hbm,
        rhs: Hbm,
        rhs_tiles: Vec<Sbuf>,
        t: FgTiling,
        nt: MatmulTiling,
    ) {
        launch_collective_permutes_hbm(src, dst, t.replica_groups, t.channel_n, t.lnc_n);
        compute_iteration(no_tiles, dst, rhs, rhs_tiles, result, iteration_id, t, nt);
    }

    /// The SBUF path: this program's slices transposed into tiles, sent
    /// around the ring in two flat buffers, each arrival multiplied.
    #[nki_helper]
    pub fn run_sbuf_path(lhs: Hbm, rhs: Hbm, rhs_tiles: Vec<Sbuf>, result: Hbm, t: FgTiling, nt: MatmulTiling) {
        let tiles = t.channel_n * t.num_block_k * t.tiles_in_block_k * t.num_block_m;
        let dtype = lhs.dtype();
        let buf0: Vec<Sbuf> = (0..tiles).map(|_| nl::ndarray([t.tile_k, t.block_m], dtype, buffer = nl::sbuf)).collect();
        let buf1: Vec<Sbuf> = (0..tiles).map(|_| nl::ndarray([t.tile_k, t.block_m], dtype, buffer = nl::sbuf)).collect();
        load_transposed_slices(lhs, buf0, t);
        let buf0_flat = nl::ndarray([t.tile_k, tiles * t.block_m], dtype, buffer = nl::sbuf);
        let buf1_flat = nl::ndarray([t.tile_k, tiles * t.block_m], dtype, buffer = nl::sbuf);

        compute_iteration(buf0, lhs, rhs, rhs_tiles, result, 0, t, nt);
        compute_step_sbuf(1, buf0, buf0_flat, buf1, buf1_flat, lhs, result, rhs, rhs_tiles, t, nt);
        for step_idx in nl::sequential_range(1, t.rank_n / 2) {
            compute_step_sbuf(2 * step_idx, buf1, buf1_flat, buf0, buf0_flat, lhs, result, rhs, rhs_tiles, t, nt);
            compute_step_sbuf(2 * step_idx + 1, buf0, buf0_flat, buf1, buf1_flat, lhs, result, rhs, rhs_tiles, t, nt);
        }
    }

    /// The HBM path: this program's slices copied into the first of two
    /// shared HBM buffers (`[m, K]`), sent around the ring, each arrival
    /// multiplied block by block.
    #[nki_helper]
    pub fn run_hbm_path(lhs: Hbm, rhs: Hbm, rhs_tiles: Vec<Sbuf>, result: Hbm, t: FgTiling, nt: MatmulTiling) {
        let [rows, k] = lhs.shape();
        let buf0 = nl::ndarray([rows, k], lhs.dtype(), buffer = nl::shared_hbm, name = "buf0_tensor_hbm");
        let buf1 = nl::ndarray([rows, k], lhs.dtype(), buffer = nl::shared_hbm, name = "buf1_tensor_hbm");
        // This path's rows stay in HBM: no SBUF row tiles.
        let no_tiles: Vec<Sbuf> = (0..0).map(|_| nl::ndarray([t.tile_k, t.block_m], lhs.dtype(), buffer = nl::sbuf)).collect();
        copy_local_rows(lhs, buf0, t);
        compute_iteration(no_tiles, buf0, rhs, rhs_tiles, result, 0, t, nt);
        compute_step_hbm(1, buf0, buf1, no_tiles, result, rhs, rhs_tiles, t, nt);
        for step_idx in nl::sequential_range(1, t.rank_n / 2) {
            compute_step_hbm(2 * step_idx, buf1, buf0, no_tiles, result, rhs, rhs_tiles, t, nt);
            compute_step_hbm(2 * step_idx + 1, buf0, buf1, no_tiles, result, rhs, rhs_tiles, t, nt);
        }
    }

    /// All-gathers each rank's `[m, K]` rows (`lhs`) over rings of
    /// `tp_degree` ranks (`num_groups` rings of consecutive ranks) and
    /// multiplies them by this rank's `[K, N]` `rhs`, returning the shared
    /// `[RANK_N, LNC_N, CHANNEL_N, local_M, N]` (SBUF path) or `[RANK_N,
    /// CHANNEL_N, LNC_N, local_M, N]` (HBM path, or `force_hbm_cc`) product.
    #[nki_kernel]
    pub fn allgather_compute_matmul(
        #[dtypes(float32, bfloat16, float16)] lhs: Hbm,
        #[dtypes(float32, bfloat16, float16)] rhs: Hbm,
        tp_degree: i64,
        num_groups: i64,
        #[default(false)] force_hbm_cc: bool,
    ) -> Hbm {
        let [m, k] = lhs.shape();
        let [k_rhs, n] = rhs.shape();
        let rank_n = tp_degree;
        let (lnc_n, lnc_id, channel_n): (i64, i64, i64) = ring_programs(tp_degree);
        let dtype_size = if lhs.dtype() == nl::float32 { 4 } else { 2 };
        // The rules of `allgather_compute_matmul_violation`, checked when the kernel is traced.
        assert!(
            rank_n >= 2 && rank_n % 2 == 0,
            "allgather_compute_matmul: tp_degree must be a positive even number, got tp_degree = {rank_n}"
        );
        assert!(num_groups >= 1, "allgather_compute_matmul: num_groups must be positive, got num_groups = {num_groups}");
        assert!(k == k_rhs, "allgather_compute_matmul: lhs K dimension must match rhs K dimension, got {k} and {k_rhs}");
        assert!(
            m % (lnc_n * channel_n) == 0,
            "allgather_compute_matmul: M = m * tp_degree must be divisible by RANK_N * LNC_N * CHANNEL_N, got m = {m}, RANK_N = {rank_n}, LNC_N = {lnc_n}, CHANNEL_N = {channel_n}"
        );
        let local_m = m / lnc_n / channel_n;
        assert!(
            (local_m <= TILE_MAX || local_m % TILE_MAX == 0)
                && (k <= TILE_MAX || k % TILE_MAX == 0)
                && (n <= TILE_N_MAX || n % TILE_N_MAX == 0),
            "allgather_compute_matmul: local_M and K must each be at most 128 or a multiple of 128, N at most 512 or a multiple of 512, got local_M = {local_m}, K = {k}, N = {n}"
        );
        let tile_m = local_m.min(TILE_M_MAX);
        let tile_n = n.min(TILE_N_MAX);
        let tile_k = k.min(TILE_MAX);
        let all_tiles_m = local_m.div_ceil(tile_m);
        let all_tiles_n = n.div_ceil(tile_n);
        let all_tiles_k = k.div_ceil(tile_k);
        // rhs whole in SBUF when two copies fit 16 MiB, else blocks of what fits.
        let rhs_in_sbuf = 2 * k * n * dtype_size <= RHS_SBUF_BUDGET_BYTES;
        let tiles_in_block_k = if rhs_in_sbuf { all_tiles_k } else { all_tiles_k.min(16 / dtype_size) };
        let tiles_in_block_n = if rhs_in_sbuf { all_tiles_n } else { all_tiles_n.min(RHS_SBUF_BUDGET_BYTES / k / tile_n / dtype_size) };
        let block_k = tile_k * tiles_in_block_k;
        let block_n = tile_n * tiles_in_block_n;
        assert!(
            block_n > 0 && k % block_k == 0 && n % block_n == 0,
            "allgather_compute_matmul: when rhs does not fit SBUF twice, its K and N blocks must divide K and N, got K = {k}, N = {n}, BLOCK_K = {block_k}, BLOCK_N = {block_n}"
        );
        // The rows in SBUF when two copies of a slice fit what rhs leaves of 24 MiB.
        let lhs_budget = TOTAL_SBUF_BUDGET_BYTES - 2 * block_k * block_n * dtype_size;
        let lhs_in_sbuf = !force_hbm_cc && 2 * local_m * k * dtype_size <= lhs_budget;
        let tiles_in_block_m = if lhs_in_sbuf { all_tiles_m } else { all_tiles_m.min(lhs_budget / block_k / tile_m / dtype_size).max(1) };
        let t: FgTiling = ring_tiling(tp_degree, num_groups, lnc_n, lnc_id, channel_n, local_m, k, tiles_in_block_m, tiles_in_block_k);
        let nt = MatmulTiling { n, tile_n, tiles_in_block_n, block_n, num_block_n: n / block_n, rhs_in_sbuf, lhs_in_sbuf };
        let rhs_count = if rhs_in_sbuf { t.num_block_k * tiles_in_block_k * nt.num_block_n } else { 0 };
        let rhs_tiles: Vec<Sbuf> = (0..rhs_count).map(|_| nl::ndarray([tile_k, block_n], rhs.dtype(), buffer = nl::sbuf)).collect();
        for k_block_idx in 0..t.num_block_k {
            for k_tile_idx in 0..tiles_in_block_k {
                for n_block_idx in 0..nt.num_block_n {
                    if rhs_in_sbuf {
                        let slot: i64 = rhs_slot(t, nt, k_block_idx, k_tile_idx, n_block_idx);
                        load_rhs_tile(rhs, rhs_tiles[slot], t, nt, k_block_idx, k_tile_idx, n_block_idx);
                    }
                }
            }
        }
        let result = if lhs_in_sbuf {
            nl::ndarray([rank_n, lnc_n, channel_n, local_m, n], lhs.dtype(), buffer = nl::shared_hbm, name = "result_tensor_sbuf")
        } else {
            nl::ndarray([rank_n, channel_n, lnc_n, local_m, n], lhs.dtype(), buffer = nl::shared_hbm, name = "result_tensor_hbm")
        };
        if lhs_in_sbuf {
            run_sbuf_path(lhs, rhs, rhs_tiles, result, t, nt);
        } else {
            run_hbm_path(lhs, rhs, rhs_tiles, result, t, nt);
        }
        result
    }
}
