//! The MX projections' shared tiling: the library's `projection_mx_constants`
//! and its `ProjConfig`, the hidden dim in 512-row MX tiles (128 partitions
//! of 4 packed values, one `nc_matmul_mx` contraction) split over the
//! programs, the intermediate dim in 512-column tiles.

pub use kernel::*;

/// The tile size and the configuration bundle.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

    /// Rows of one MX contraction tile: `H0 · MX_PACK`.
    pub const MX_TILE: i64 = 512;
    /// Scale groups of one MX tile: its 128 partitions in groups of 8.
    pub const GROUPS_PER_MX_TILE: i64 = 16;

    /// The library's `ProjConfig`: the sizes of the projections and this
    /// program's share of the hidden dim.
    #[nki_object]
    pub struct ProjConfig {
        /// Hidden size `H`.
        pub h: i64,
        /// Intermediate size `I`.
        pub i: i64,
        /// Tokens, `B · S` padded to a multiple of 4.
        pub bxs: i64,
        /// Programs of the launch, each holding one hidden shard.
        pub n_prgs: i64,
        /// This program's shard.
        pub prg_id: i64,
        /// 128-column layout columns of a shard, `H / 128 / n_prgs`.
        pub h1_sharded: i64,
        /// Hidden columns of a shard, `H / n_prgs`.
        pub h_sharded: i64,
        /// MX tiles of `H`, `H / 512`.
        pub n_h512_tile: i64,
        /// MX tiles of a shard.
        pub n_h512_tile_sharded: i64,
        /// 512-column tiles of `I`, the last possibly partial.
        pub n_total_i512_tile: i64,
    }

    /// The configuration of `H`, `I` and `bxs` padded tokens on program
    /// `prg_id` of `n_prgs`.
    #[nki_helper]
    pub fn proj_config(h: i64, i: i64, bxs: i64, n_prgs: i64, prg_id: i64) -> ProjConfig {
        ProjConfig {
            h,
            i,
            bxs,
            n_prgs,
            prg_id,
            h1_sharded: h / H0 / n_prgs,
            h_sharded: h / n_prgs,
            n_h512_tile: h / MX_TILE,
            n_h512_tile_sharded: h / MX_TILE / n_prgs,
            n_total_i512_tile: i.div_ceil(H0 * MX_PACK),
        }
    }
}
