//! The decode path's constants: the library's `mlp_tkg_constants`, the PSUM
//! tile, the dtype of the sums, the exchange queue, the tile sizes of the
//! two matmul arrangements and the per-program sizes.

pub use kernel::*;

/// The constants and the dimension bundle.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPQuantizationParameters};
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// Output columns per down-projection chunk: one fp32 PSUM bank.
    pub const PSUM_FMAX: i64 = nl::tile_size::psum_fmax;
    /// PSUM banks: the projections keep at most this many accumulators live.
    pub const PSUM_BMAX: i64 = 8;
    /// The dtype of the projections' sums and of the activation.
    pub const INTER_DTYPE: Dtype = nl::float32;
    /// The DMA queue the two programs exchange partial sums over.
    pub const PIPE_ID: i64 = 0;
    /// Layout columns of hidden (128 rows each) per gate/up weight load:
    /// 2048 rows, twice that for fp8 weights (half the bytes).
    pub const GATE_UP_H_TILE_COLS: i64 = 16;
    /// Hidden columns per down weight load with down column tiling (twice
    /// that for fp8 weights), fewer when their PSUM banks would not fit.
    pub const DOWN_H_TILE: i64 = 4096;

    /// `I` columns one gate/up projection call covers with column tiling:
    /// eight PSUM banks of 512 fp32 columns.
    pub const MAX_I_SHARD_COLUMN_TILING: i64 = 4096;
    /// `I` columns one call covers with the weights stationary: eight banks
    /// of one 128-column tile each.
    pub const MAX_I_SHARD_LHS_RHS_SWAP: i64 = 1024;

    /// One projection's operands as the projection helpers read them: the
    /// weights, the bias and, with fp8 weights, their dequantization scales
    /// (`row`: one per output column, else one per tensor).
    #[nki_object]
    pub struct ProjectionWeights {
        /// `[H, I]` (gate, up) or `[I, H]` (down).
        pub weights: Tensor,
        /// `[1, I]` or `[1, H]`.
        pub bias: Option<Tensor>,
        /// `[128, n]` float32, rows meant as copies (see `MLPQuantizationParameters`).
        pub w_scale: Option<Tensor>,
        /// `QuantizationType.ROW`.
        pub row: bool,
    }

    /// The library's `MLPTKGConstants` dimensions: sizes, the hidden shard
    /// of this program and the matmul arrangement of each projection.
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
        /// `use_tkg_gate_up_proj_column_tiling`: the hidden rows stationary.
        pub gate_up_column_tiling: bool,
        /// `use_tkg_down_proj_column_tiling`: the gated product stationary.
        pub down_column_tiling: bool,
        /// PE columns one stationary token tile takes with column tiling: 32,
        /// 64 or 128, the least that holds `T` (64 on NeuronCore-v2, which
        /// cannot tile 32 columns).
        pub column_tiling_dim: i64,
        /// Stationary tiles side by side on the PE array, `128 / column_tiling_dim`.
        pub column_tiling_factor: i64,
    }

    /// The dimensions of `t` tokens, `h` hidden and `i` intermediate
    /// columns over `n` hidden shards (this program's `shard_id`), with each
    /// projection's column tiling on or off (the library's
    /// `calculate_constants`).
    #[nki_helper]
    pub fn tkg_dims(
        t: i64,
        h: i64,
        i: i64,
        n: i64,
        shard_id: i64,
        gate_up_column_tiling: bool,
        down_column_tiling: bool,
    ) -> MLPTKGConstants {
        let fit: i64 = if t <= 32 {
            32
        } else if t <= 64 {
            64
        } else {
            H0
        };
        let column_tiling_dim: i64 = if nisa::get_nc_version() == nisa::nc_version::gen2 { 64 } else { fit };
        MLPTKGConstants {
            t,
            h,
            i,
            h1: h / H0,
            num_shards: n,
            shard_id,
            h_per_shard: h / n,
            h1_shard: h / H0 / n,
            i_tiles: i.div_ceil(H0),
            gate_up_column_tiling,
            down_column_tiling,
            column_tiling_dim,
            column_tiling_factor: H0 / column_tiling_dim,
        }
    }

    /// A projection's weights, bias and (fp8) scales as the phases take them.
    #[nki_helper]
    pub fn projection_weights(
        weights: Hbm,
        bias: Option<Hbm>,
        w_scale: Option<Hbm>,
        quant: MLPQuantizationParameters,
    ) -> ProjectionWeights {
        ProjectionWeights { weights, bias, w_scale, row: quant.quantization_type == QuantizationType::ROW }
    }
}
