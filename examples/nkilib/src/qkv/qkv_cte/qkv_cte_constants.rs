//! The tile sizes and limits of `qkv_cte`, its quantization dtypes and bounds.

pub use kernel::*;

/// The constants.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Partitions: S tiles of rows, and the 128-row pieces of H after the transpose.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Columns of one fp32 PSUM bank: one matmul's moving free size.
    pub const PSUM_FMAX: i64 = nl::tile_size::psum_fmax;
    /// PSUM banks: one per S tile and 512 output columns of an S block.
    pub const NUM_HW_PSUM_BANKS: i64 = 8;
    /// The largest `H`.
    pub const MAX_H: i64 = 24576;
    /// The largest `I`: every PSUM bank of one S tile.
    pub const MAX_I: i64 = 4096;
    /// The head size of the NBSd layout.
    pub const NBSD_D_HEAD: i64 = 128;
    /// Hidden rows per weight load (one DMA of `[128, 8, I]`).
    pub const WEIGHT_LOAD_BLOCK_SIZE_PER_H: i64 = 1024;
    /// 128-row pieces of H per weight load.
    pub const NUM_128_TILES_PER_WEIGHT_LOAD: i64 = 8;
    /// S tiles per block at most.
    pub const MAX_S_MULTI_BUFFER_DEGREE: i64 = 5;
    /// Sequences shorter than this per program are folded into one `B·S` batch.
    pub const S_THRESHOLD_FOR_RESHAPE: i64 = 640;
    /// Columns per `bn_stats` instruction.
    pub const BN_STATS_TILE_SIZE: i64 = 512;
    /// Statistics per `bn_stats` instruction.
    pub const BN_STATS_DST_SIZE: i64 = 6;
    /// STATIC quantization's weight and input dtype.
    pub const QUANT_DTYPE: Dtype = nl::float8_e4m3;
    /// The largest finite `float8_e4m3` before NeuronCore-v4: STATIC clips the input to ±this.
    pub const FP8_E4M3_MAX: f64 = 240.0;
    /// The same on NeuronCore-v4.
    pub const FP8_E4M3_MAX_GEN4: f64 = 448.0;
    /// Q, K and V: STATIC's weight scales.
    pub const NUM_QKV_SEGMENTS: i64 = 3;
    /// The largest finite `float8_e5m2`: the KV caches' default clip bound in that dtype.
    pub const FP8_E5M2_MAX: f64 = 57344.0;
}
