//! The all-expert path's affinities: the library's
//! `moe_tkg_affinity_masking`, this rank's slice of the global experts and
//! the optional mask of the experts a token did not select.
//!
//! ```text
//! base = rank_id · E_L                               # on the device
//! aff[t, e] = expert_affinities[t, base + e]         # e < E_L, scalar_offset DMA
//! (mask_unselected_experts)
//!     aff[t, e] *= #{k : expert_index[t, k] == base + e}
//! ```
//!
//! The tokens are tiled by 128 onto the partitions: the result is `[min(T,
//! 128), ceil(T / 128), E_L]` in the affinities' dtype, tile `j` holding
//! tokens `128 j ..`.

pub use kernel::*;

/// The masking.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Token rows per tile: the partitions.
    pub const T_TILE: i64 = nl::tile_size::pmax;

    /// `rank_id · E_L` `[rows, 1]` (float32, every partition): the first
    /// global expert of this rank.
    #[nki_helper]
    pub fn expert_offset(rank_id: Hbm, e_l: i64, rows: i64) -> Sbuf {
        let rank_sb = nl::ndarray([T_TILE, 1], rank_id.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(rank_sb[s![0..rows, ..]], rank_id.ap([[0, rows], [1, 1]], offset = 0));
        let base = nl::ndarray([T_TILE, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(base[s![0..rows, ..]], rank_sb[s![0..rows, ..]], nl::multiply, e_l as f64);
        base
    }

    /// Multiplies each local expert's column of `aff` `[rows, E_L]` by the
    /// number of `expert_index` entries of tokens `t0 .. t0 + rows` naming it
    /// (`base + e`, `base` from [`expert_offset`]).
    #[nki_helper]
    pub fn apply_expert_index_mask(aff: Sbuf, expert_index: Hbm, base: Sbuf, t0: i64, rows: i64, e_l: i64) {
        let k = expert_index.shape()[1];
        let idx = nl::ndarray([T_TILE, k], expert_index.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(idx[s![0..rows, ..]], expert_index[s![t0..t0 + rows, ..]]);
        let idx_f = nl::ndarray([T_TILE, k], nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(idx_f[s![0..rows, ..]], idx[s![0..rows, ..]]);
        let id = nl::ndarray([T_TILE, 1], nl::float32, buffer = nl::sbuf);
        let hit = nl::ndarray([T_TILE, k], nl::float32, buffer = nl::sbuf);
        let count = nl::ndarray([T_TILE, 1], nl::float32, buffer = nl::sbuf);
        for e in 0..e_l {
            nisa::tensor_scalar(id[s![0..rows, ..]], base[s![0..rows, ..]], nl::add, e as f64);
            nisa::tensor_scalar(hit[s![0..rows, ..]], idx_f[s![0..rows, ..]], nl::equal, id[s![0..rows, ..]]);
            nisa::tensor_reduce(count[s![0..rows, ..]], nl::add, hit[s![0..rows, ..]], 1);
            nisa::tensor_tensor(aff[s![0..rows, e..e + 1]], aff[s![0..rows, e..e + 1]], count[s![0..rows, ..]], nl::multiply);
        }
    }

    /// This rank's affinities into `aff` `[min(T, 128), ceil(T / 128), E_L]`
    /// (module docs), masked by `expert_index` when `mask_unselected_experts`.
    #[nki_helper]
    pub fn mask_expert_affinities(aff: Sbuf, expert_affinities: Hbm, expert_index: Hbm, rank_id: Hbm, mask_unselected_experts: bool) {
        let [t, e] = expert_affinities.shape();
        let e_l = aff.shape()[2];
        let tiles = t.div_ceil(T_TILE);
        let base = expert_offset(rank_id, e_l, t.min(T_TILE));
        let off = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::tensor_copy(off, base[s![0..1, ..]]);
        for j in 0..tiles {
            let t0 = j * T_TILE;
            let rows = (t - t0).min(T_TILE);
            nisa::dma_copy(
                aff[s![0..rows, j, ..]],
                expert_affinities.ap([[e, rows], [1, e_l]], offset = t0 * e, scalar_offset = off, indirect_dim = 1),
            );
            if mask_unselected_experts {
                apply_expert_index_mask(aff[s![.., j, ..]], expert_index, base, t0, rows, e_l);
            }
        }
    }
}
