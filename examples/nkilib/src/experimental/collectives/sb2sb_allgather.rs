//! The NKI library's SBUF-to-SBUF all-gathers (`allgather_sb2sb` and
//! `allgather_sb2sb_tiled`): each rank's `[rows, W]` input gathered along its
//! columns from every rank of the caller's `ncc.ReplicaGroup`, so that every
//! rank of a group holds the `[rows, W · tp_degree]` concatenation of the
//! group's inputs in group order, in shared HBM.
//!
//! One `ncc.all_gather` (`collective_dim = 1`) moves SBUF tiles between the
//! ranks; HBM is touched only to load the input and store the result:
//!
//! ```text
//! allgather_sb2sb:                        allgather_sb2sb_tiled:
//!   in_buf  = inp              # SBUF       for each of this program's row tiles:
//!   all_gather(in_buf -> out_buf)             src_tile = inp[tile rows]
//!   out     = out_buf          # HBM          all_gather(src_tile -> dst_tile)
//!                                             result[tile rows] = dst_tile
//! ```
//!
//! The untiled kernel takes at most `TILE_M = 128` rows (`nl.tile_size.pmax`,
//! the SBUF partitions). The tiled one cuts the rows into tiles of
//! `min(M, 128)`; with an LNC grid the tiles are split evenly over the
//! programs, program `p` taking the `p`-th run of consecutive tiles, each
//! program gathering its own tiles with the same programs of the other ranks.
//! One tile is gathered by every program (each writes the same rows).

pub use kernel::*;

/// Why an `allgather_sb2sb` or `allgather_sb2sb_tiled` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllGatherSb2sbRule {
    /// `allgather_sb2sb`: the input has more rows than SBUF partitions.
    Height,
    /// `allgather_sb2sb_tiled`: `M` is over 128 and not a multiple of 128.
    Rows,
    /// `allgather_sb2sb_tiled`: several row tiles do not split evenly over
    /// the LNC programs.
    Programs,
}

impl AllGatherSb2sbRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            AllGatherSb2sbRule::Height => "allgather_sb2sb: H must be <= 128 to fit in SBUF partitions",
            AllGatherSb2sbRule::Rows => "allgather_sb2sb_tiled: M must be <= 128 or divisible by 128",
            AllGatherSb2sbRule::Programs => "allgather_sb2sb_tiled: the number of M tiles must be divisible by the number of LNC programs",
        }
    }
}

/// One call, for [`allgather_sb2sb_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllGatherSb2sbShape {
    /// Rows of each rank's input (`H`, or `M` when tiled).
    pub rows: i64,
    /// Whether the call is `allgather_sb2sb_tiled`.
    pub tiled: bool,
    /// LNC programs per rank.
    pub lnc: i64,
}

/// The row tiles of `rows` rows in tiles of `min(rows, 128)`.
pub const fn num_m_tiles(rows: i64) -> i64 {
    let tile = if rows < TILE_M { rows } else { TILE_M };
    (rows + tile - 1) / tile
}

/// The first library rule a call breaks, or `None`.
pub const fn allgather_sb2sb_violation(c: AllGatherSb2sbShape) -> Option<AllGatherSb2sbRule> {
    if !c.tiled {
        return if c.rows <= TILE_M { None } else { Some(AllGatherSb2sbRule::Height) };
    }
    if c.rows > TILE_M && c.rows % TILE_M != 0 {
        return Some(AllGatherSb2sbRule::Rows);
    }
    let tiles = num_m_tiles(c.rows);
    if tiles > 1 && (c.lnc < 1 || tiles % c.lnc != 0) {
        return Some(AllGatherSb2sbRule::Programs);
    }
    None
}

/// A call checked at compile time: the [`AllGatherSb2sbShape`] of the given
/// rows (untiled, LNC 2 unless given), or a compile error naming the rule it
/// breaks.
///
/// ```
/// let c = nkilib::allgather_sb2sb_config!(rows = 384, tiled = true, lnc = 1);
/// assert_eq!(nkilib::experimental::collectives::sb2sb_allgather::num_m_tiles(c.rows), 3);
/// ```
///
/// ```compile_fail
/// // Three row tiles do not split over two programs.
/// let c = nkilib::allgather_sb2sb_config!(rows = 384, tiled = true);
/// ```
#[macro_export]
macro_rules! allgather_sb2sb_config {
    (rows = $rows:expr $(, $field:ident = $value:expr)* $(,)?) => {
        $crate::__collective_config!(
            [$crate::experimental::collectives::sb2sb_allgather::AllGatherSb2sbShape],
            [$crate::experimental::collectives::sb2sb_allgather::allgather_sb2sb_violation],
            { rows: $rows, tiled: false, lnc: 2 },
            { $($field = $value),* }
        )
    };
}

/// The kernels with their tile constant.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Rows per tile at most: the SBUF partitions (`nl.tile_size.pmax`).
    pub const TILE_M: i64 = nl::tile_size::pmax;

    /// All-gathers each rank's `[H, W]` input (`H <= 128`) along its columns
    /// over `replica_groups` (groups of `tp_degree` ranks) through SBUF,
    /// returning the shared `[H, W · tp_degree]` concatenation in group order.
    #[nki_kernel]
    pub fn allgather_sb2sb(inp: Hbm, replica_groups: ReplicaGroup, tp_degree: i64) -> Hbm {
        let [h, w] = inp.shape();
        assert!(h <= TILE_M, "allgather_sb2sb: H must be <= 128 to fit in SBUF partitions, got H = {h}");
        let k = w * tp_degree;
        let in_buf = nl::ndarray([h, w], inp.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(in_buf, inp[s![0..h, 0..w]]);
        let out_buf = nl::ndarray([h, k], inp.dtype(), buffer = nl::sbuf);
        let out = nl::ndarray([h, k], inp.dtype(), buffer = nl::shared_hbm);
        ncc::all_gather([in_buf], [out_buf], replica_groups, 1);
        nisa::dma_copy(out[s![0..h, 0..k]], out_buf);
        out
    }

    /// This program's run of row tiles, `(first tile, tiles)`: every tile
    /// without an LNC grid, the `p`-th of `LNC` equal runs with one, and the
    /// only tile on every program when there is one.
    #[nki_helper]
    pub fn program_tiles(num_m_tiles: i64) -> (i64, i64) {
        let grid = nl::program_ndim() != 0;
        let n_prgs = if grid { nl::num_programs(0) } else { 1 };
        let prg_id = if grid { nl::program_id(0) } else { 0 };
        assert!(
            num_m_tiles == 1 || num_m_tiles % n_prgs == 0,
            "allgather_sb2sb_tiled: the number of M tiles must be divisible by the number of LNC programs, got {num_m_tiles} tiles over {n_prgs} programs"
        );
        let tiles_per_core = if num_m_tiles == 1 { 1 } else { num_m_tiles / n_prgs };
        let tile_start = if num_m_tiles == 1 { 0 } else { prg_id * tiles_per_core };
        (tile_start, tiles_per_core)
    }

    /// All-gathers row tile `m_tile_idx` (`tile_m` rows) of `inp` over
    /// `replica_groups` into the same rows of `result`.
    #[nki_helper]
    pub fn gather_tile(inp: Hbm, result: Hbm, replica_groups: ReplicaGroup, m_tile_idx: i64, tile_m: i64) {
        let [_, k_local] = inp.shape();
        let [_, k_total] = result.shape();
        let (start, end) = (m_tile_idx * tile_m, (m_tile_idx + 1) * tile_m);
        let src_tile = nl::ndarray([tile_m, k_local], inp.dtype(), buffer = nl::sbuf);
        let dst_tile = nl::ndarray([tile_m, k_total], inp.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(src_tile, inp[s![start..end, 0..k_local]]);
        ncc::all_gather([src_tile], [dst_tile], replica_groups, 1);
        nisa::dma_copy(result[s![start..end, 0..k_total]], dst_tile);
    }

    /// All-gathers each rank's `[M, K]` input (`M <= 128` or a multiple of
    /// 128) along its columns over `replica_groups` (groups of `tp_degree`
    /// ranks), one `[min(M, 128), K]` row tile at a time, the tiles split over
    /// the LNC programs; returns the shared `[M, K · tp_degree]` result.
    #[nki_kernel]
    pub fn allgather_sb2sb_tiled(inp: Hbm, replica_groups: ReplicaGroup, tp_degree: i64) -> Hbm {
        let [m, k_local] = inp.shape();
        let k_total = k_local * tp_degree;
        let tile_m = m.min(TILE_M);
        assert!(m <= TILE_M || m % TILE_M == 0, "allgather_sb2sb_tiled: M must be <= 128 or divisible by 128, got M = {m}");
        let num_m_tiles = m.div_ceil(tile_m);
        let (tile_start, tiles_per_core): (i64, i64) = program_tiles(num_m_tiles);
        let result = nl::ndarray([m, k_total], inp.dtype(), buffer = nl::shared_hbm);
        for local_tile_idx in nl::affine_range(tiles_per_core) {
            gather_tile(inp, result, replica_groups, tile_start + local_tile_idx, tile_m);
        }
        result
    }
}
