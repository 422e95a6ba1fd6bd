//! The context-encoding path's constants: the library's
//! `mlp_cte_constants`, its tile sizes and dtypes, and the bundle of the
//! program's sizes and shard.

pub use kernel::*;

/// The tile constants and the per-program bundles.
#[nki::nki_module]
pub mod kernel {
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
    /// The DMA queue the two programs of an `I`-sharded call exchange their
    /// partial down projections over.
    pub const PIPE_ID_INT_SHARD: i64 = 1;

    /// The library's `MLPCTEConstants` as this port reads them: the compute
    /// dtype, and which rows and intermediate columns this program owns.
    #[nki_object]
    pub struct MLPCTEConstants {
        /// The dtype tiles are computed in: hidden's, bfloat16 for fp32 hidden.
        pub compute_dtype: Dtype,
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
}
