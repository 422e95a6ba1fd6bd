//! What `mlp` is configured with: the library's activation enum, the bundle of
//! scalar options the phases share, and the call's rules as `const fn`s.
//!
//! The rules follow the library's argument validation: `H` a multiple of 128,
//! positive sizes, bias shapes, normalization bias only with `LAYER_NORM`, the
//! optimized down-projection layout only without down column tiling, the
//! output columns of a program within 8 PSUM banks without it, the clamps,
//! SBUF output and the optimized layout only in token generation, and the
//! sharded dim of each path splitting evenly over the programs. On top of
//! them, `ROW_MX` is refused by name (see [`MlpRule`]; the library's `mlp`
//! takes no `ROW_MX` either). `MX` follows the library's `mlp_tkg_mx`
//! ([`mx_violation`]), `STATIC_MX` its context-encoding static-MX branches
//! ([`static_mx_violation`]). The fp8 forms follow the
//! library's two paths: token generation multiplies 16-bit hidden rows by
//! fp8 weights; context encoding takes hidden rows already quantized to
//! `float8_e4m3` (the library's quantized context-encoding path reads them
//! so), without a norm, a residual add or projection biases.

use crate::mlp::mlp_tkg::mlp_tkg_constants::{PSUM_BMAX, PSUM_FMAX};
use crate::mlp::mlp_tkg::projection_mx_constants::MX_TILE;
use crate::utils::mx_layout::SCALE_GROUP_SIZE;

pub use kernel::*;

/// The call's tensors and options as the phases read them, and the sizes
/// both paths tile by.
#[nki::nki_module]
pub mod kernel {
    pub use crate::utils::common_types::{ActFnType, NormType, QuantizationType};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// Partitions: the hidden and intermediate dims are tiled by them.
    pub const H0: i64 = 128;
    /// Token counts up to this run the token-generation path.
    pub const TKG_BS_SEQLEN_THRESHOLD: i64 = 96;
    /// `float8_e4m3` elements (bytes) a `ROW`-quantized hidden row ends with:
    /// its fp32 dequantization scale.
    pub const ROW_SCALE_BYTES: i64 = 4;

    /// [`MlpRule::DownPsumBanks`](super::MlpRule::DownPsumBanks) (the kernel's assert names it too).
    pub const DOWN_PSUM_BANKS: &str =
        "mlp: use_tkg_down_proj_column_tiling=False needs H / 128 / programs <= 8 * (512 // (B * S)) (the down projection's PSUM banks)";

    /// [`MlpRule::StaticMxTokenGeneration`](super::MlpRule::StaticMxTokenGeneration)
    /// (each `STATIC_MX` rule's one message, which the kernel's asserts name too).
    pub const STATIC_MX_TOKEN_GENERATION: &str =
        "mlp: quantization_type STATIC_MX is only supported in context encoding (B * S > 96 or force_cte_mode)";
    /// [`MlpRule::StaticMxTiles`](super::MlpRule::StaticMxTiles).
    pub const STATIC_MX_TILES: &str = "mlp: quantization_type STATIC_MX needs H and I to be multiples of 512";
    /// [`MlpRule::StaticMxShards`](super::MlpRule::StaticMxShards).
    pub const STATIC_MX_SHARDS: &str =
        "mlp: quantization_type STATIC_MX needs I / programs to be a multiple of 512 when the programs split I";
    /// [`MlpRule::StaticMxRows`](super::MlpRule::StaticMxRows).
    pub const STATIC_MX_ROWS: &str = "mlp: quantization_type STATIC_MX needs an even number of token rows on each program (B * S, or B * S / programs when the programs split the tokens)";

    /// The tensors of an `mlp` call, as the phases read them (the library
    /// keeps them in its `MLPParameters` and its bias and norm bundles), in
    /// the order of the kernel's signature.
    #[nki_object]
    pub struct MLPTensors {
        /// Gate projection weights `[H, I]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4)]
        pub gate_proj_weights_tensor: Tensor,
        /// Up projection weights `[H, I]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4)]
        pub up_proj_weights_tensor: Tensor,
        /// Down projection weights `[I, H]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4)]
        pub down_proj_weights_tensor: Tensor,
        /// Gamma `[1, H]` of the norm.
        #[dtypes(float32, bfloat16, float16)]
        pub normalization_weights_tensor: Option<Tensor>,
        /// Gate projection bias `[1, I]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gate_proj_bias_tensor: Option<Tensor>,
        /// Up projection bias `[1, I]`.
        #[dtypes(float32, bfloat16, float16)]
        pub up_proj_bias_tensor: Option<Tensor>,
        /// Down projection bias `[1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub down_proj_bias_tensor: Option<Tensor>,
        /// Beta `[1, H]` of a LayerNorm.
        #[dtypes(float32, bfloat16, float16)]
        pub normalization_bias_tensor: Option<Tensor>,
        /// The residual added to the hidden rows first.
        #[dtypes(float32, bfloat16, float16)]
        pub fused_add_tensor: Option<Tensor>,
    }

    /// The scalar options the gate/up phase reads (the library keeps them in
    /// its `MLPParameters`).
    #[nki_object]
    pub struct MLPActivationParameters {
        /// The activation of the gate (or of the up projection with `skip_gate_proj`).
        pub activation_fn: ActFnType,
        /// Only the up projection, activated, feeds the down projection.
        pub skip_gate_proj: bool,
        /// The gate's clamps (before its activation) and the up projection's.
        pub clamps: ClampLimits,
    }

    /// The fp8 quantization the projections undo (the library's
    /// `MLPQuantizationParameters`). Each scale is a float32 `[128, n]`
    /// tensor whose rows are meant as copies of one scale (the library's
    /// partition-broadcast layout): `n = 1` for `STATIC` (one scale per
    /// tensor), the projection's output columns (`I`, or `H` for the down
    /// weights) for `ROW`'s weight scales. Token `t` of a tile reads row `t`,
    /// as the library's arrangements do. The input scales and the clipping
    /// bound belong to the context-encoding path, whose activations are fp8
    /// too (see [`mlp_cte`](crate::mlp::mlp_cte::mlp_cte)).
    #[nki_object]
    pub struct MLPQuantizationParameters {
        /// `NONE`, `STATIC`, `ROW` or `MX`.
        #[default(QuantizationType::NONE)]
        pub quantization_type: QuantizationType,
        /// Dequantization scales of the gate weights (`MX`: `uint8` block
        /// scales `[16, H/512, I]`, one per 32 packed values).
        #[dtypes(float32, uint8)]
        #[default(None)]
        pub gate_w_scale: Option<Tensor>,
        /// Dequantization scales of the up weights.
        #[dtypes(float32, uint8)]
        #[default(None)]
        pub up_w_scale: Option<Tensor>,
        /// Dequantization scales of the down weights.
        #[dtypes(float32, uint8)]
        #[default(None)]
        pub down_w_scale: Option<Tensor>,
        /// `STATIC`: the dequantization scale of the fp8 hidden rows.
        #[default(None)]
        pub gate_up_in_scale: Option<Tensor>,
        /// `STATIC`: the scale the gated product is quantized with (divided
        /// by) and dequantized with.
        #[default(None)]
        pub down_in_scale: Option<Tensor>,
        /// `ROW`: the gated product is clipped to `[-bound, bound]` before its
        /// rows are quantized (no clipping when not positive).
        #[default(0.0)]
        pub clipping_bound: f64,
    }

    /// The decode path's layout options (the library's `use_tkg_*` flags).
    #[nki_object]
    pub struct MlpTkgOptions {
        /// Split the gate/up projections' columns over the programs.
        #[default(true)]
        pub use_tkg_gate_up_proj_column_tiling: bool,
        /// Split the down projection's columns over the programs.
        #[default(true)]
        pub use_tkg_down_proj_column_tiling: bool,
        /// The down weights in the optimized layout.
        #[default(false)]
        pub use_tkg_down_proj_optimized_layout: bool,
    }

    /// Where the output goes and in what dtype.
    #[nki_object]
    pub struct MlpOutputOptions {
        /// The output's dtype (the hidden rows' when `None`).
        pub output_dtype: Option<Dtype>,
        /// Leave the output in SBUF (refused: the output is an HBM tensor).
        #[default(false)]
        pub store_output_in_sbuf: bool,
    }

    /// An `mlp` call as both paths run it (the library's `MLPParameters`):
    /// the token rows, where the results go, the tensors and the options.
    #[nki_object]
    pub struct MLPParameters {
        /// The token rows `[T, H]` (`[T, H + 4]` for `ROW`-quantized rows).
        pub hidden: Tensor,
        /// The weights, biases, norm vectors and residual.
        pub w: MLPTensors,
        /// The result rows `[T, H]`.
        pub output: Tensor,
        /// The residual sum's rows `[T, H]`, when it is stored.
        pub stored: Option<Tensor>,
        /// The norm of the rows.
        pub normalization_type: NormType,
        /// The norm's epsilon.
        pub eps: f64,
        /// The gate/up options.
        pub act: MLPActivationParameters,
        /// The fp8 quantization.
        pub quant: MLPQuantizationParameters,
    }
}

/// Why an `mlp` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlpRule {
    /// `H` is not a positive multiple of 128.
    HiddenTiles,
    /// `B·S` or `I` is not positive.
    Sizes,
    /// A gate/up clamp limit on the context-encoding path (the library takes
    /// them in token generation only).
    CteClamp,
    /// `use_tkg_down_proj_optimized_layout` on the context-encoding path.
    CteOptimizedLayout,
    /// More than two programs on the context-encoding path (it pairs them).
    CtePrograms,
    /// The dim the context-encoding path shards (the tokens, or `I` for the
    /// calls [`cte_shards_on_intermediate`] names) does not split evenly over
    /// the programs.
    CteShards,
    /// `quantization_type` is `ROW_MX` (the library's `mlp` refuses it too).
    Quantization,
    /// `STATIC_MX` in token generation (the library's static-MX path is
    /// context encoding only).
    StaticMxTokenGeneration,
    /// `STATIC_MX` with `H` or `I` not a multiple of 512 (the weights'
    /// documented pre-shuffle is in whole 512-row blocks).
    StaticMxTiles,
    /// `STATIC_MX` splitting `I` over the programs in parts that are not
    /// multiples of 512 (each program's columns are whole pre-shuffled blocks).
    StaticMxShards,
    /// `STATIC_MX` with an odd number of token rows on a program (`B · S`,
    /// or `B · S / programs` when the programs split the tokens): the
    /// gate/up `nc_matmul_mx` takes an even moving width.
    StaticMxRows,
    /// `MX` outside token generation (the library's MX path is `mlp_tkg_mx`).
    MxTokenGeneration,
    /// `MX` with `H` not a multiple of 512 (one MX contraction tile).
    MxHidden,
    /// `MX` with `I` neither a multiple of 512 nor below 512 and a multiple of 32.
    MxIntermediate,
    /// `MX` with a norm other than `NO_NORM`, `RMS_NORM`, `RMS_NORM_SKIP_GAMMA`.
    MxNorm,
    /// `MX` with either column tiling on (the library asserts both off).
    MxColumnTiling,
    /// `MX` with a fused residual add.
    MxFusedAdd,
    /// `MX` with a clamp, `skip_gate_proj` or the optimized down layout (the
    /// library's MX path applies none of them).
    MxOptions,
    /// `MX` on more than two programs, or `H / 512` not split evenly over them.
    MxShards,
    /// `STATIC` or `ROW` quantization on the context-encoding path with 16-bit
    /// hidden rows (that path reads them quantized, `float8_e4m3`).
    CteQuantization,
    /// `float8_e4m3` hidden rows without `STATIC` or `ROW` quantization.
    InputQuantization,
    /// `float8_e4m3` hidden rows in token generation (it takes 16-bit rows).
    TkgQuantizedInput,
    /// `float8_e4m3` hidden rows with a norm, a residual add or a projection
    /// bias (the library's quantized context-encoding path has none of them).
    CteQuantizedInputOptions,
    /// A normalization bias with a norm other than `LAYER_NORM`.
    NormBias,
    /// `use_tkg_down_proj_optimized_layout` together with down column tiling.
    OptimizedLayout,
    /// Down column tiling off with more output columns per program than 8
    /// PSUM banks hold, `H / 128 / programs > 8 · (512 / (B · S))` (the
    /// weights-stationary down projection keeps every column's sums live;
    /// the library asserts the same).
    DownPsumBanks,
    /// `store_output_in_sbuf` (the output is an HBM tensor here).
    SbufOutput,
    /// `H / 128` does not split evenly over the programs of the launch.
    HiddenShards,
}

impl MlpRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            MlpRule::HiddenTiles => "mlp: H must be a positive multiple of 128",
            MlpRule::Sizes => "mlp: B * S and I must be positive",
            MlpRule::CteClamp => "mlp: the gate/up clamp limits are only supported in token generation (B * S <= 96, force_cte_mode off)",
            MlpRule::CteOptimizedLayout => {
                "mlp: use_tkg_down_proj_optimized_layout is only supported in token generation (B * S <= 96, force_cte_mode off)"
            }
            MlpRule::CtePrograms => "mlp: the context-encoding path runs on 1 or 2 programs (LNC1 or LNC2)",
            MlpRule::CteShards => {
                "mlp: the context-encoding path's sharded dim (B * S, or I when it shards I) must split evenly over the programs"
            }
            MlpRule::Quantization => {
                "mlp: quantization_type must be QuantizationType.NONE, STATIC, ROW, MX or STATIC_MX (the library's mlp takes no ROW_MX)"
            }
            MlpRule::StaticMxTokenGeneration => STATIC_MX_TOKEN_GENERATION,
            MlpRule::StaticMxTiles => STATIC_MX_TILES,
            MlpRule::StaticMxShards => STATIC_MX_SHARDS,
            MlpRule::StaticMxRows => STATIC_MX_ROWS,
            MlpRule::MxTokenGeneration => {
                "mlp: quantization_type MX is only supported in token generation (B * S <= 96, force_cte_mode off)"
            }
            MlpRule::MxHidden => "mlp: quantization_type MX needs H to be a multiple of 512",
            MlpRule::MxIntermediate => "mlp: quantization_type MX needs I to be a multiple of 512, or below 512 and a multiple of 32",
            MlpRule::MxNorm => "mlp: quantization_type MX supports NormType.NO_NORM, RMS_NORM and RMS_NORM_SKIP_GAMMA",
            MlpRule::MxColumnTiling => {
                "mlp: quantization_type MX needs use_tkg_gate_up_proj_column_tiling=False and use_tkg_down_proj_column_tiling=False"
            }
            MlpRule::MxFusedAdd => "mlp: quantization_type MX takes no fused_add_tensor",
            MlpRule::MxOptions => {
                "mlp: quantization_type MX takes no gate/up clamp limits, skip_gate_proj or use_tkg_down_proj_optimized_layout"
            }
            MlpRule::MxShards => "mlp: quantization_type MX runs on 1 or 2 programs with H / 512 split evenly over them",
            MlpRule::CteQuantization => {
                "mlp: quantization_type STATIC and ROW in context encoding (B * S > 96 or force_cte_mode) need a float8_e4m3 hidden_tensor"
            }
            MlpRule::InputQuantization => "mlp: a float8_e4m3 hidden_tensor needs quantization_type STATIC or ROW",
            MlpRule::TkgQuantizedInput => {
                "mlp: a float8_e4m3 hidden_tensor is only supported in context encoding (B * S > 96 or force_cte_mode)"
            }
            MlpRule::CteQuantizedInputOptions => {
                "mlp: a float8_e4m3 hidden_tensor takes no normalization, fused_add_tensor or projection bias"
            }
            MlpRule::NormBias => "mlp: normalization_bias_tensor is only supported with NormType.LAYER_NORM",
            MlpRule::OptimizedLayout => "mlp: use_tkg_down_proj_optimized_layout needs use_tkg_down_proj_column_tiling=False",
            MlpRule::DownPsumBanks => DOWN_PSUM_BANKS,
            MlpRule::SbufOutput => "mlp: store_output_in_sbuf is not implemented (the output is an HBM tensor)",
            MlpRule::HiddenShards => "mlp: H / 128 must split evenly over the programs of the launch (the LNC size) in token generation",
        }
    }
}

/// An `mlp` call as the rules read it: the sizes and the options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MlpCall {
    /// `B · S`, the tokens.
    pub tokens: i64,
    /// `H`, the hidden size.
    pub hidden: i64,
    /// `I`, the intermediate size.
    pub intermediate: i64,
    /// The programs of the launch (its LNC size), 1 without a grid.
    pub programs: i64,
    /// `normalization_type`.
    pub normalization_type: NormType,
    /// Whether `normalization_bias_tensor` is given.
    pub has_norm_bias: bool,
    /// `quantization_type`.
    pub quantization_type: QuantizationType,
    /// `store_output_in_sbuf`.
    pub store_output_in_sbuf: bool,
    /// `use_tkg_down_proj_column_tiling`.
    pub use_tkg_down_proj_column_tiling: bool,
    /// `use_tkg_gate_up_proj_column_tiling`.
    pub use_tkg_gate_up_proj_column_tiling: bool,
    /// `skip_gate_proj`.
    pub skip_gate_proj: bool,
    /// `use_tkg_down_proj_optimized_layout`.
    pub use_tkg_down_proj_optimized_layout: bool,
    /// `force_cte_mode`.
    pub force_cte_mode: bool,
    /// Whether any of the gate, up or down projection biases is given.
    pub has_projection_bias: bool,
    /// Whether any of the four clamp limits is given.
    pub clamped: bool,
    /// Whether `hidden_tensor` is `float8_e4m3` (already quantized).
    pub quantized_input: bool,
    /// Whether `fused_add_tensor` is given.
    pub has_fused_add: bool,
}

impl MlpCall {
    /// No sizes and every option at the kernel's default: what the fields a
    /// call does not name take.
    pub const DEFAULTS: MlpCall = MlpCall {
        tokens: 0,
        hidden: 0,
        intermediate: 0,
        programs: 1,
        normalization_type: NormType::NO_NORM,
        has_norm_bias: false,
        quantization_type: QuantizationType::NONE,
        store_output_in_sbuf: false,
        use_tkg_down_proj_column_tiling: true,
        use_tkg_gate_up_proj_column_tiling: true,
        skip_gate_proj: false,
        use_tkg_down_proj_optimized_layout: false,
        force_cte_mode: false,
        has_projection_bias: false,
        clamped: false,
        quantized_input: false,
        has_fused_add: false,
    };
}

/// Whether a call of `tokens` tokens runs the token-generation path (the
/// library's `is_mlp_tkg`).
pub const fn is_mlp_tkg(tokens: i64, force_cte_mode: bool) -> bool {
    tokens <= TKG_BS_SEQLEN_THRESHOLD && !force_cte_mode
}

/// Whether a context-encoding call splits `I` (rather than the tokens) over
/// its programs: the library's choice, which the kernel makes with
/// [`shard_on_intermediate`](crate::mlp::mlp_cte::mlp_cte_sharding::shard_on_intermediate)
/// (two programs with at most 256 tokens and no projection bias, or `I >
/// 2048` a multiple of 256; never below `H = 7168` or `I = 1024`; always
/// above `I = 4096`).
pub const fn cte_shards_on_intermediate(tokens: i64, hidden: i64, intermediate: i64, programs: i64, has_projection_bias: bool) -> bool {
    let mut inter = (programs == 2 && tokens <= 256 && !has_projection_bias) || (intermediate > 2048 && intermediate % 256 == 0);
    if hidden < 7168 || intermediate < 1024 {
        inter = false;
    }
    if intermediate > 4096 {
        inter = true;
    }
    programs > 1 && inter
}

/// The first rule `c` breaks.
pub const fn mlp_violation(c: MlpCall) -> Option<MlpRule> {
    if c.hidden <= 0 || c.hidden % H0 != 0 {
        return Some(MlpRule::HiddenTiles);
    }
    if c.tokens <= 0 || c.intermediate <= 0 {
        return Some(MlpRule::Sizes);
    }
    let has_norm = !matches!(c.normalization_type, NormType::NO_NORM);
    if has_norm && c.has_norm_bias && !matches!(c.normalization_type, NormType::LAYER_NORM) {
        return Some(MlpRule::NormBias);
    }
    if c.use_tkg_down_proj_optimized_layout && c.use_tkg_down_proj_column_tiling {
        return Some(MlpRule::OptimizedLayout);
    }
    if !matches!(
        c.quantization_type,
        QuantizationType::NONE | QuantizationType::STATIC | QuantizationType::ROW | QuantizationType::MX | QuantizationType::STATIC_MX
    ) {
        return Some(MlpRule::Quantization);
    }
    if c.store_output_in_sbuf {
        return Some(MlpRule::SbufOutput);
    }
    let quantized = !matches!(c.quantization_type, QuantizationType::NONE);
    if c.quantized_input && !quantized {
        return Some(MlpRule::InputQuantization);
    }
    if c.programs <= 0 {
        return Some(MlpRule::HiddenShards);
    }
    if matches!(c.quantization_type, QuantizationType::MX) {
        return mx_violation(c);
    }
    let static_mx = matches!(c.quantization_type, QuantizationType::STATIC_MX);
    if static_mx && is_mlp_tkg(c.tokens, c.force_cte_mode) {
        return Some(MlpRule::StaticMxTokenGeneration);
    }
    if is_mlp_tkg(c.tokens, c.force_cte_mode) {
        if c.quantized_input {
            return Some(MlpRule::TkgQuantizedInput);
        }
        if (c.hidden / H0) % c.programs != 0 {
            return Some(MlpRule::HiddenShards);
        }
        let per_bank = PSUM_FMAX / c.tokens;
        if !c.use_tkg_down_proj_column_tiling && (c.hidden / H0 / c.programs + per_bank - 1) / per_bank > PSUM_BMAX {
            return Some(MlpRule::DownPsumBanks);
        }
        return None;
    }
    if c.clamped {
        return Some(MlpRule::CteClamp);
    }
    if quantized && !c.quantized_input {
        return Some(MlpRule::CteQuantization);
    }
    if c.quantized_input && (has_norm || c.has_fused_add || c.has_projection_bias) {
        return Some(MlpRule::CteQuantizedInputOptions);
    }
    if c.use_tkg_down_proj_optimized_layout {
        return Some(MlpRule::CteOptimizedLayout);
    }
    if c.programs > 2 {
        return Some(MlpRule::CtePrograms);
    }
    let sharded = if cte_shards_on_intermediate(c.tokens, c.hidden, c.intermediate, c.programs, c.has_projection_bias) {
        c.intermediate
    } else {
        c.tokens
    };
    if sharded % c.programs != 0 {
        return Some(MlpRule::CteShards);
    }
    if static_mx {
        return static_mx_violation(c);
    }
    None
}

/// The first rule a context-encoding `STATIC_MX` call `c` breaks, past
/// the fp8 rules it shares with `STATIC`: `H` and `I` in whole 512-row
/// pre-shuffled blocks, and each program's part of `I` too when the
/// programs split `I`; an even number of token rows on each program.
pub const fn static_mx_violation(c: MlpCall) -> Option<MlpRule> {
    if c.hidden % MX_TILE != 0 || c.intermediate % MX_TILE != 0 {
        return Some(MlpRule::StaticMxTiles);
    }
    let on_intermediate = cte_shards_on_intermediate(c.tokens, c.hidden, c.intermediate, c.programs, c.has_projection_bias);
    if on_intermediate && (c.intermediate / c.programs) % MX_TILE != 0 {
        return Some(MlpRule::StaticMxShards);
    }
    let rows = if on_intermediate { c.tokens } else { c.tokens / c.programs };
    if rows % 2 != 0 {
        return Some(MlpRule::StaticMxRows);
    }
    None
}

/// The first rule an `MX` call `c` breaks (the library's `mlp_tkg_mx`
/// and its argument checks): token generation only, `H` in 512-row MX
/// tiles, `I` in whole scale groups, RMSNorm or none, neither column tiling,
/// no residual add, clamps, `skip_gate_proj` or optimized down layout, and
/// the MX tiles of `H` split evenly over one or two programs.
pub const fn mx_violation(c: MlpCall) -> Option<MlpRule> {
    if !is_mlp_tkg(c.tokens, c.force_cte_mode) {
        return Some(MlpRule::MxTokenGeneration);
    }
    if c.quantized_input {
        return Some(MlpRule::TkgQuantizedInput);
    }
    if c.hidden % MX_TILE != 0 {
        return Some(MlpRule::MxHidden);
    }
    if !(c.intermediate % MX_TILE == 0 || (c.intermediate < MX_TILE && c.intermediate % SCALE_GROUP_SIZE == 0)) {
        return Some(MlpRule::MxIntermediate);
    }
    if !matches!(c.normalization_type, NormType::NO_NORM | NormType::RMS_NORM | NormType::RMS_NORM_SKIP_GAMMA) {
        return Some(MlpRule::MxNorm);
    }
    if c.use_tkg_gate_up_proj_column_tiling || c.use_tkg_down_proj_column_tiling {
        return Some(MlpRule::MxColumnTiling);
    }
    if c.has_fused_add {
        return Some(MlpRule::MxFusedAdd);
    }
    if c.clamped || c.skip_gate_proj || c.use_tkg_down_proj_optimized_layout {
        return Some(MlpRule::MxOptions);
    }
    if c.programs > 2 || (c.hidden / MX_TILE) % c.programs != 0 {
        return Some(MlpRule::MxShards);
    }
    None
}

/// An `mlp` call checked at compile time, or a compile error naming the rule
/// it breaks. Options not given take the kernel's defaults.
///
/// ```
/// let c = nkilib::mlp_config!(tokens = 8, hidden = 4096, intermediate = 896, programs = 2);
/// assert_eq!((c.tokens, c.intermediate), (8, 896));
/// ```
///
/// ```compile_fail
/// // 128 tokens take the context-encoding path, which has no clamps.
/// let c = nkilib::mlp_config!(tokens = 128, hidden = 4096, intermediate = 896, programs = 1, clamped = true);
/// ```
#[macro_export]
macro_rules! mlp_config {
    (tokens = $t:expr, hidden = $h:expr, intermediate = $i:expr, programs = $p:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::mlp::mlp_parameters::MlpCall = $crate::mlp::mlp_parameters::MlpCall {
            tokens: $t,
            hidden: $h,
            intermediate: $i,
            programs: $p,
            $($field: $v,)*
            ..$crate::mlp::mlp_parameters::MlpCall::DEFAULTS
        };
        const _: () = if let Some(rule) = $crate::mlp::mlp_parameters::mlp_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}
