//! The context-encoding path's constants: the library's
//! `mlp_cte_constants`, its tile sizes and dtypes, and the bundle of the
//! program's sizes and shard.

pub use kernel::*;

/// The tile constants and the per-program bundles.
#[nki::nki_module]
pub mod kernel {
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// Partitions: token rows per tile, contraction rows per matmul.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Columns of one fp32 PSUM bank: the `I` chunk of a gate/up sum and
    /// the `H` chunk of a down-projection sum.
    pub const PSUM_FMAX: i64 = nl::tile_size::psum_fmax;
    /// Columns per `bn_stats` (LayerNorm statistics).
    pub const BN_STATS_FMAX: i64 = nl::tile_size::bn_stats_fmax;
    /// Elements `bn_stats` writes per chunk and `bn_aggr` per row.
    pub const BN_STATS_ELEMENTS: i64 = 6;
    /// Hidden rows of one gate/up weight load (8 partition tiles).
    pub const SRC_PROJ_H_TILE: i64 = 1024;
    /// The dtype of the statistics, the activations' input and the sums.
    pub const ACT_DTYPE: Dtype = nl::float32;
    /// The largest finite `float8_e4m3` value: the gated product's
    /// quantization range.
    pub const FP8_E4M3_MAX: f64 = 240.0;
    /// Floor of a `ROW` quantization's per-row dequantization scale (an
    /// all-zero row would otherwise divide by zero).
    pub const ROW_QUANT_MIN_SCALE: f64 = 1e-6;
    /// The DMA queue the two programs of an `I`-sharded call exchange their
    /// partial down projections over.
    pub const PIPE_ID_INT_SHARD: i64 = 1;

    /// The library's `MLPCTEConstants` as this port reads them: the dtypes,
    /// and which rows and intermediate columns this program owns.
    #[nki_object]
    pub struct MLPCTEConstants {
        /// The dtype tiles are computed in: hidden's, bfloat16 for fp32 or
        /// fp8 hidden.
        pub compute_dtype: Dtype,
        /// The dtype of the loaded hidden rows: fp8 rows stay fp8, others
        /// take the compute dtype.
        pub hidden_tile_dtype: Dtype,
        /// The dtype the gate and up weights are multiplied in: fp8 weights
        /// stay fp8, others take the compute dtype.
        pub src_proj_quant_dtype: Dtype,
        /// The same for the down weights, and the dtype the gated product is
        /// quantized to with fp8 weights.
        pub down_proj_quant_dtype: Dtype,
        /// Hidden size `H`.
        pub h: i64,
        /// `I` of the whole call.
        pub i_total: i64,
        /// Intermediate columns this program projects.
        pub i: i64,
        /// The first of them.
        pub i_offset: i64,
        /// Token rows this program processes.
        pub t: i64,
        /// The first of them.
        pub t_offset: i64,
        /// Programs of the launch.
        pub programs: i64,
        /// This program.
        pub program_id: i64,
        /// Whether the programs split `I` (else they split the tokens).
        pub shard_on_intermediate: bool,
    }

    /// The vectors loaded once per call and broadcast on the partitions: the
    /// norm's gamma and beta (`[128, H/128]`, element `h` at `[h % 128, h /
    /// 128]`, fp32), the projection biases (`[128, I]`, `[128, H]`, in the
    /// compute dtype), and the norm's epsilon and a zero activation bias
    /// (`[128, 1]`).
    #[nki_object]
    pub struct MLPCTEVectors {
        /// Gamma of the norm, when it has one.
        pub gamma: Option<Tensor>,
        /// Beta of a LayerNorm.
        pub beta: Option<Tensor>,
        /// Gate projection bias, this program's columns.
        pub gate_bias: Option<Tensor>,
        /// Up projection bias, this program's columns.
        pub up_bias: Option<Tensor>,
        /// Down projection bias (`None` on the second program of an `I`-sharded call).
        pub down_bias: Option<Tensor>,
        /// Epsilon in the compute dtype.
        pub eps: Tensor,
        /// Zeros (fp32), the bias of the activations.
        pub zero: Tensor,
    }

    /// The fp8 dequantization scales, loaded once per call (the library's
    /// `*_static_*_scales_sbuf` and `*_row_weight_scales_sbuf`). `STATIC`:
    /// `[128, 1]` fp32, the weights' scales already multiplied by their input
    /// scale, and the reciprocal of `down_in_scale` (the gated product's
    /// quantization scale). `ROW`: the gate and up weights' scales `[128, I]`
    /// (this program's columns); the down weights' `[128, H]` stays in HBM
    /// and is read one 512-column chunk at a time.
    #[nki_object]
    pub struct MLPCTEQuantScales {
        /// `NONE`, `STATIC` or `ROW`.
        pub quantization_type: QuantizationType,
        /// The gate projection's dequantization scale.
        pub gate: Option<Tensor>,
        /// The up projection's dequantization scale.
        pub up: Option<Tensor>,
        /// `STATIC`: the down projection's dequantization scale.
        pub down: Option<Tensor>,
        /// `STATIC`: `1 / down_in_scale`.
        pub down_in_inv: Option<Tensor>,
        /// `ROW`: the down weights' row scales in HBM.
        pub down_row_w_scale: Option<Tensor>,
        /// `ROW`: the clipping bound of the gated product (none when not positive).
        pub clipping_bound: f64,
    }
}
