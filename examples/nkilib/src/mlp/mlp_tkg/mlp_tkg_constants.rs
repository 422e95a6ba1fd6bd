//! The decode path's constants: the library's `mlp_tkg_constants`, the PSUM
//! tile, the dtype of the sums, the exchange queue and the per-program sizes.

pub use kernel::*;

/// The constants and the dimension bundle.
#[nki::nki_module]
pub mod kernel {

    use nki::prelude::*;

    /// Output columns per down-projection chunk: one fp32 PSUM bank.
    pub const PSUM_FMAX: i64 = nl::tile_size::psum_fmax;
    /// The dtype of the projections' sums and of the activation.
    pub const INTER_DTYPE: Dtype = nl::float32;
    /// The DMA queue the two programs exchange partial sums over.
    pub const PIPE_ID: i64 = 0;

    /// The library's `MLPTKGConstants` dimensions: sizes, and the hidden shard
    /// of this program.
    #[nki_object]
    pub struct MLPTKGConstants {
        /// Tokens, `B · S`.
        pub t: i64,
        /// Hidden size `H`.
        pub h: i64,
        /// Intermediate size `I`.
        pub i: i64,
        /// `H / 128`.
        pub h1: i64,
        /// Programs of the launch, each holding one hidden shard.
        pub num_shards: i64,
        /// This program's shard.
        pub shard_id: i64,
        /// Hidden columns of a shard, `H / num_shards`.
        pub h_per_shard: i64,
        /// Layout columns of a shard, `H1 / num_shards`.
        pub h1_shard: i64,
        /// 128-row tiles of `I` (the last may be partial).
        pub i_tiles: i64,
    }
}
