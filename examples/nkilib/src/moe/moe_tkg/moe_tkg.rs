//! The decode-phase mixture-of-experts MLP: the library's `moe_tkg`, which
//! checks the call, slices and masks the affinities, and dispatches to the
//! all-expert or the selective-expert path.
//!
//! Each expert is the gated MLP of `mlp_tkg`, whose phases both paths call:
//!
//! ```text
//! expert_e(x) = (act(clamp(x @ W_gate[e] + b_gate[e])) · clamp(x @ W_up[e] + b_up[e])) @ W_down[e] + b_down[e]
//! all-expert:        out[t] = Σ_{e < E_L} s[t, e] · expert_e(x[t])
//! selective-expert:  out[t] = Σ_k s[t, idx[t, k]] · expert_{idx[t, k]}(x[t])
//! ```
//!
//! with `s` the affinities under `POST_SCALE` and 1 under `NO_SCALE`; the
//! all-expert affinities are this rank's slice of the global experts
//! (`rank_id · E_L ..`), masked to the experts each token selected with
//! `mask_unselected_experts`. `ROW` quantization: `float8_e4m3` weights whose
//! projections are multiplied by per-column scales before their bias.
//!
//! The MX weight forms (`float4_e2m1fn_x4`, `float8_e4m3fn_x4`, trn3, with
//! `uint8` block scales) run the selective-expert path of
//! [`selective_expert_mx_impl`](crate::moe::moe_tkg::selective_expert_mx_impl)
//! (its module docs give the layouts) or the all-expert path of
//! [`all_expert_mx_impl`](crate::moe::moe_tkg::all_expert_mx_impl) (with
//! `is_all_expert_dynamic`, its dynamic form
//! [`all_expert_mx_dynamic`](crate::moe::moe_tkg::all_expert_mx_dynamic):
//! each expert on the blocks of `block_size` tokens routed to it), under
//! the rules of [`mx_violation`].
//!
//! Options this port does not implement are refused by name (see
//! [`MoeTkgRule`]): `hidden_input_scale` (the library takes it only with
//! an MX all-expert input already quantized in SBUF, and a launched
//! kernel's inputs are HBM tensors) and SBUF input or output.
//! `is_all_expert_dynamic` and `block_size` choose a control-flow strategy
//! of the MX all-expert path only; without MX weights they are checked and
//! change nothing here, as in the library's non-MX path.

use crate::mlp::mlp_parameters::H0;
use crate::mlp::mlp_tkg::projection_mx_constants::MX_TILE;
use crate::moe::moe_tkg::selective_expert_impl::selective_shards_tokens;
use crate::utils::mx_layout::SCALE_GROUP_SIZE;

pub use kernel::*;

/// The entry.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters};
    use crate::mlp::mlp_tkg::projection_mx_constants::{GROUPS_PER_MX_TILE, MX_TILE};
    use crate::moe::moe_tkg::all_expert_impl::_all_expert_moe_tkg;
    use crate::moe::moe_tkg::all_expert_mx_dynamic::_all_expert_mx_dynamic;
    use crate::moe::moe_tkg::all_expert_mx_impl::_all_expert_moe_tkg_mx;
    use crate::moe::moe_tkg::moe_tkg_utils::{MoeTkgOptions, MoeTkgTensors};
    use crate::moe::moe_tkg::selective_expert_impl::{_selective_expert_moe_tkg, shard_on_t};
    use crate::moe::moe_tkg::selective_expert_mx_impl::_selective_expert_moe_tkg_mxfp4;
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode, QuantizationType};
    use crate::utils::kernel_helpers::{ClampLimits, check_2d, check_3d};
    use crate::utils::mx_layout::{MX_GROUP_PARTITIONS, MX_PACK, SCALE_GROUP_SIZE};
    use nki::prelude::*;

    /// The most tokens the selective path takes (they sit on the partitions).
    pub const MAX_SELECTIVE_TOKENS: i64 = nl::tile_size::pmax;
    /// The most experts the MX path's down-bias matmul contracts over.
    pub const MAX_MX_BIAS_EXPERTS: i64 = nl::tile_size::pmax;

    /// The call's tensor shapes and dtypes (the rules of
    /// [`moe_tkg_violation`](super::moe_tkg_violation) on the sizes come first).
    #[nki_helper]
    pub fn check_tensors(w: MoeTkgTensors, quantized: bool) {
        let [e_l, h, _, i] = w.expert_gate_up_weights.shape();
        let t = w.hidden_input.shape()[0];
        check_3d(Some(w.expert_down_weights), "moe_tkg", "expert_down_weights", e_l, i, h);
        let a = w.expert_affinities.shape();
        assert!(w.expert_affinities.ndim() == 2 && a[0] == t, "moe_tkg: expert_affinities must be [T = {t}, E], got {a}");
        let x = w.expert_index.shape();
        assert!(w.expert_index.ndim() == 2 && x[0] == t, "moe_tkg: expert_index must be [T = {t}, K], got {x}");
        check_2d(w.rank_id, "moe_tkg", "rank_id", 1, 1);
        check_3d(w.expert_gate_up_bias, "moe_tkg", "expert_gate_up_bias", e_l, 2, i);
        check_2d(w.expert_down_bias, "moe_tkg", "expert_down_bias", e_l, h);
        check_3d(w.expert_gate_up_weights_scale, "moe_tkg", "expert_gate_up_weights_scale", e_l, 2, i);
        check_2d(w.expert_down_weights_scale, "moe_tkg", "expert_down_weights_scale", e_l, h);
        let fp8 = nl::float8_e4m3;
        let (gw, dw) = (w.expert_gate_up_weights.dtype(), w.expert_down_weights.dtype());
        assert!(
            quantized == (gw == fp8) && quantized == (dw == fp8),
            "moe_tkg: the expert weights must be float8_e4m3 exactly when both weight scales are given (ROW), got {gw} and {dw}"
        );
        if quantized {
            check_scale_dtypes(w, nl::float32, "ROW");
            assert!(
                w.hidden_input.dtype() != nl::float32,
                "moe_tkg: hidden_input must be bfloat16 or float16 with fp8 weights (they multiply it as it is), got float32"
            );
        }
    }

    /// The MX form's rules (those of [`moe_tkg_violation`](super::moe_tkg_violation)
    /// for it, in its order) and its tensors' shapes and dtypes (module docs).
    #[nki_helper]
    pub fn check_tensors_mx(w: MoeTkgTensors, is_all_expert: bool, mode: ExpertAffinityScaleMode, programs: i64) {
        let [t, h] = w.hidden_input.shape();
        let [e_l, _, _, n_h, i] = w.expert_gate_up_weights.shape();
        let [_, k] = w.expert_index.shape();
        let e = w.expert_affinities.shape()[1];
        let (gate_up_scale, down_scale) = (w.expert_gate_up_weights_scale, w.expert_down_weights_scale);
        assert!(
            gate_up_scale.is_some() && down_scale.is_some(),
            "moe_tkg: MX weights need expert_gate_up_weights_scale and expert_down_weights_scale"
        );
        assert!(h % MX_TILE == 0, "moe_tkg: MX weights need H to be a multiple of 512, got H = {h}");
        assert!(
            i % MX_TILE == 0 || (i < MX_TILE && i % SCALE_GROUP_SIZE == 0),
            "moe_tkg: MX weights need I to be a multiple of 512, or below 512 and a multiple of 32, got I = {i}"
        );
        assert!(
            is_all_expert || k % programs == 0,
            "moe_tkg: the MX selective-expert path splits the top-k slots over the programs: K = {k} must be a multiple of {programs}"
        );
        assert!(
            mode == ExpertAffinityScaleMode::POST_SCALE,
            "moe_tkg: the MX paths always scale by the affinities: expert_affinities_scaling_mode must be POST_SCALE, got {mode}"
        );
        assert!(
            is_all_expert || w.expert_down_bias.is_none() || (e <= MAX_MX_BIAS_EXPERTS && e == e_l),
            "moe_tkg: with MX weights the down bias is weighted by all E affinities at once: E = {e} must be E_L = {e_l} and at most 128"
        );
        assert!(nisa::get_nc_version() == nisa::nc_version::gen4, "moe_tkg: MX weights need trn3 (nc_matmul_mx)");
        let x = w.hidden_input.dtype();
        assert!(
            x == nl::bfloat16 || x == nl::float16,
            "moe_tkg: hidden_input must be bfloat16 or float16 with MX weights (quantize_mx reads 16-bit data), got {x}"
        );
        let (n_i, gw, dw) = (i.div_ceil(MX_TILE), w.expert_gate_up_weights.dtype(), w.expert_down_weights.dtype());
        assert!(dw == gw, "moe_tkg: expert_down_weights must share expert_gate_up_weights' MX dtype {gw}, got {dw}");
        let i_p = if i < MX_TILE { i / MX_PACK } else { H0 };
        check_mx_4d(Some(w.expert_down_weights), "expert_down_weights", e_l, i_p, n_i, h);
        check_mx_5d(gate_up_scale, "expert_gate_up_weights_scale", e_l, GROUPS_PER_MX_TILE, n_h, i);
        check_mx_4d(down_scale, "expert_down_weights_scale", e_l, i_p / MX_GROUP_PARTITIONS, n_i, h);
        let b_p = if i <= MX_TILE { i / MX_PACK } else { H0 };
        check_mx_5d(w.expert_gate_up_bias, "expert_gate_up_bias", e_l, b_p, n_i, MX_PACK);
        check_2d(w.expert_down_bias, "moe_tkg", "expert_down_bias", e_l, h);
        check_scale_dtypes(w, nl::uint8, "MX");
        let a = w.expert_affinities.shape();
        assert!(w.expert_affinities.ndim() == 2 && a[0] == t, "moe_tkg: expert_affinities must be [T = {t}, E], got {a}");
    }

    /// Asserts the given weight scales are `dtype` (`form` names the
    /// weight form in the message).
    #[nki_helper]
    pub fn check_scale_dtypes(w: MoeTkgTensors, dtype: Dtype, form: &str) {
        let (gate_up_scale, down_scale) = (w.expert_gate_up_weights_scale, w.expert_down_weights_scale);
        if let Some(v) = gate_up_scale {
            assert!(v.dtype() == dtype, "moe_tkg: the {form} expert_gate_up_weights_scale must be {dtype}, got {}", v.dtype());
        }
        if let Some(v) = down_scale {
            assert!(v.dtype() == dtype, "moe_tkg: the {form} expert_down_weights_scale must be {dtype}, got {}", v.dtype());
        }
    }

    /// Asserts an MX-form tensor, when given, is `[e, a, b, c]`.
    #[nki_helper]
    pub fn check_mx_4d(v: Option<Hbm>, name: &str, e: i64, a: i64, b: i64, c: i64) {
        if let Some(x) = v {
            let d = x.shape();
            assert!(
                x.ndim() == 4 && d[0] == e && d[1] == a && d[2] == b && d[3] == c,
                "moe_tkg: {name} must be [{e}, {a}, {b}, {c}] with MX weights, got {d}"
            );
        }
    }

    /// Asserts a fused MX-form tensor, when given, is `[e, a, 2, b, c]`
    /// (the gate half then the up half).
    #[nki_helper]
    pub fn check_mx_5d(v: Option<Hbm>, name: &str, e: i64, a: i64, b: i64, c: i64) {
        if let Some(x) = v {
            let d = x.shape();
            assert!(
                x.ndim() == 5 && d[0] == e && d[1] == a && d[2] == 2 && d[3] == b && d[4] == c,
                "moe_tkg: {name} must be [{e}, {a}, 2, {b}, {c}] with MX weights, got {d}"
            );
        }
    }

    /// The library's `_is_valid_block_size` for the MX all-expert dynamic
    /// strategy (`mx_dynamic_block_size_ok`): `bs` divides `T`, is at most
    /// `T / 2`, and is a multiple of 8 below 32, of 32 below 128, else of 128.
    #[nki_helper]
    pub fn is_valid_block_size(t: i64, bs: i64) -> bool {
        let multiple = if bs < 32 {
            8
        } else if bs < 128 {
            32
        } else {
            128
        };
        bs > 0 && t % bs == 0 && bs <= t / 2 && bs % multiple == 0
    }

    /// The activations' quantization scales (the library's static and
    /// pre-quantized inputs, refused here by name).
    #[nki_params]
    pub struct MoeTkgInputScales {
        /// The scale of a `hidden_input` quantized upstream.
        pub hidden_input_scale: Option<Hbm>,
        /// Static quantization: the gate/up input's scale.
        pub gate_up_input_scale: Option<Hbm>,
        /// Static quantization: the down input's scale.
        pub down_input_scale: Option<Hbm>,
    }

    /// How the affinities weigh the experts' outputs.
    #[nki_params]
    pub struct MoeTkgAffinityOptions {
        /// All-expert: zero the affinity of a local expert a token did not select.
        #[default(false)]
        pub mask_unselected_experts: bool,
        /// Affinities applied eagerly (refused with `is_all_expert`).
        pub expert_affinities_eager: Option<Hbm>,
        /// Whether each expert's output is multiplied by its affinity.
        #[default(ExpertAffinityScaleMode::NO_SCALE)]
        pub expert_affinities_scaling_mode: ExpertAffinityScaleMode,
    }

    /// The mixture-of-experts MLP of `hidden_input` `[T, H]` over the local
    /// experts' fused gate/up weights `[E_L, H, 2, I]` and down weights
    /// `[E_L, I, H]`; returns `[T, H]` (module docs).
    #[nki_kernel]
    pub fn moe_tkg(
        #[spread(to = expert_index)] _: MoeTkgTensors,
        is_all_expert: bool,
        #[spread(from = rank_id)] _: MoeTkgTensors,
        #[spread] _: MoeTkgInputScales,
        #[spread] _: MoeTkgAffinityOptions,
        #[default(ActFnType::SiLU)] activation_fn: ActFnType,
        output_dtype: Option<Dtype>,
        #[spread] clamps: ClampLimits,
        #[default(false)] output_in_sbuf: bool,
        #[default(false)] is_all_expert_dynamic: bool,
        block_size: Option<i64>,
    ) -> Hbm {
        assert!(hidden_input.ndim() == 2, "moe_tkg: hidden_input must be [T, H] in HBM, got {}", hidden_input.shape());
        let [t, h] = hidden_input.shape();
        let gs = expert_gate_up_weights.shape();
        let gw = expert_gate_up_weights.dtype();
        let mx = gw == nl::float4_e2m1fn_x4 || gw == nl::float8_e4m3fn_x4;
        assert!(
            mx || (expert_gate_up_weights.ndim() == 4 && gs[1] == h && gs[2] == 2),
            "moe_tkg: expert_gate_up_weights must be [E_L, H = {h}, 2, I], got {gs}"
        );
        assert!(
            !mx || (expert_gate_up_weights.ndim() == 5 && gs[1] == H0 && gs[2] == 2 && gs[3] * MX_TILE == h),
            "moe_tkg: MX expert_gate_up_weights must be [E_L, 128, 2, H / 512, I] (H = {h}), got {gs}"
        );
        let (e_l, i) = (gs[0], gs[expert_gate_up_weights.ndim() - 1]);
        let k = expert_index.shape()[expert_index.ndim() - 1];
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let post = expert_affinities_scaling_mode == ExpertAffinityScaleMode::POST_SCALE;
        // The rules of `moe_tkg_violation`, checked when the kernel is traced.
        assert!(h > 0 && h % H0 == 0, "moe_tkg: H = {h} must be a positive multiple of 128");
        assert!(t > 0 && i > 0 && e_l > 0 && k > 0, "moe_tkg: T = {t}, I = {i}, E_L = {e_l} and K = {k} must be positive");
        assert!(
            is_all_expert || t <= MAX_SELECTIVE_TOKENS,
            "moe_tkg: the selective-expert path takes at most 128 tokens (T = batch size * seq len), got {t}"
        );
        assert!(programs <= 2, "moe_tkg: runs on 1 or 2 programs (LNC1 or LNC2), got {programs}");
        let hidden_sharded = !mx && (is_all_expert || !shard_on_t(t, h, i, programs));
        assert!(
            !hidden_sharded || (h / H0) % programs == 0,
            "moe_tkg: H / 128 = {} must split evenly over the {programs} programs of the launch (this call shards H)",
            h / H0
        );
        assert!(
            expert_affinities_scaling_mode != ExpertAffinityScaleMode::PRE_SCALE
                && expert_affinities_scaling_mode != ExpertAffinityScaleMode::PRE_SCALE_DELAYED,
            "moe_tkg: expert_affinities_scaling_mode must be NO_SCALE or POST_SCALE, got {expert_affinities_scaling_mode}"
        );
        assert!(!is_all_expert || !post || rank_id.is_some(), "moe_tkg: rank_id is required for all-expert mode with affinity scaling");
        assert!(
            gate_up_input_scale.is_none() && down_input_scale.is_none(),
            "moe_tkg: static quantization (gate_up_input_scale, down_input_scale) is not supported"
        );
        assert!(
            hidden_input_scale.is_none() || (mx && is_all_expert),
            "moe_tkg: hidden_input_scale is only supported with MX weights in all-expert mode"
        );
        assert!(
            hidden_input_scale.is_none(),
            "moe_tkg: hidden_input_scale goes with a hidden_input quantized upstream and held in SBUF, which a launched kernel cannot take (its inputs are HBM tensors)"
        );
        let mx_dynamic = mx && is_all_expert && is_all_expert_dynamic;
        assert!(
            !mx_dynamic || e_l == 1,
            "moe_tkg: the MX all-expert dynamic strategy (is_all_expert_dynamic) takes one local expert (E_L = 1), got {e_l}"
        );
        let bs = block_size.unwrap_or(t);
        assert!(
            !mx_dynamic || block_size.is_none() || is_valid_block_size(t, bs),
            "moe_tkg: the MX all-expert dynamic strategy needs a block_size that divides T = {t}, is at most T / 2, and is a multiple of 8 below 32, of 32 below 128, else of 128; got {bs}"
        );
        let w = MoeTkgTensors {
            hidden_input,
            expert_gate_up_weights,
            expert_down_weights,
            expert_affinities,
            expert_index,
            rank_id,
            expert_gate_up_bias,
            expert_down_bias,
            expert_gate_up_weights_scale,
            expert_down_weights_scale,
        };
        let quantized = expert_gate_up_weights_scale.is_some() && expert_down_weights_scale.is_some();
        if mx {
            check_tensors_mx(w, is_all_expert, expert_affinities_scaling_mode, programs);
        } else {
            assert!(
                quantized || (expert_gate_up_weights_scale.is_none() && expert_down_weights_scale.is_none()),
                "moe_tkg: ROW quantization needs both expert_gate_up_weights_scale and expert_down_weights_scale"
            );
        }
        assert!(
            !is_all_expert_dynamic || (is_all_expert && block_size.is_some()),
            "moe_tkg: is_all_expert_dynamic=True requires is_all_expert=True and a block_size"
        );
        assert!(
            !is_all_expert_dynamic || !mask_unselected_experts,
            "moe_tkg: mask_unselected_experts is not supported with is_all_expert_dynamic=True"
        );
        assert!(
            !is_all_expert || expert_affinities_eager.is_none(),
            "moe_tkg: expert_affinities_eager is not supported with is_all_expert=True"
        );
        assert!(!output_in_sbuf, "moe_tkg: output_in_sbuf is not implemented (the output is an HBM tensor)");
        if !mx {
            check_tensors(w, quantized);
        }
        let act = MLPActivationParameters { activation_fn, skip_gate_proj: false, clamps };
        let quantization_type = if mx {
            QuantizationType::MX
        } else if quantized {
            QuantizationType::ROW
        } else {
            QuantizationType::NONE
        };
        let opts = MoeTkgOptions { expert_affinities_scaling_mode, mask_unselected_experts, quantization_type, act };
        let output = nl::ndarray([t, h], output_dtype.unwrap_or(hidden_input.dtype()), buffer = nl::shared_hbm);
        if is_all_expert && mx {
            // `POST_SCALE` (checked) needs the rank in all-expert mode.
            if let Some(r) = rank_id {
                if is_all_expert_dynamic {
                    _all_expert_mx_dynamic(w, opts, r, bs, output);
                } else {
                    _all_expert_moe_tkg_mx(w, opts, r, output);
                }
            }
        } else if is_all_expert {
            _all_expert_moe_tkg(w, opts, output);
        } else if mx {
            _selective_expert_moe_tkg_mxfp4(w, opts, output);
        } else {
            _selective_expert_moe_tkg(w, opts, output);
        }
        output
    }
}

/// Why a `moe_tkg` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeTkgRule {
    /// `H` is not a positive multiple of 128.
    HiddenTiles,
    /// `T`, `I`, `E_L` or `K` is not positive.
    Sizes,
    /// More than 128 tokens on the selective-expert path.
    SelectiveTokens,
    /// More than two programs.
    Programs,
    /// `H / 128` does not split over the programs of a hidden-sharded call.
    HiddenShards,
    /// `PRE_SCALE` or `PRE_SCALE_DELAYED` affinity scaling.
    ScalingMode,
    /// All-expert `POST_SCALE` without `rank_id`.
    RankId,
    /// `gate_up_input_scale` / `down_input_scale` (static quantization).
    StaticQuantization,
    /// Only one of the two weight scales.
    RowScales,
    /// `hidden_input_scale` without MX weights in all-expert mode.
    HiddenInputScale,
    /// MX all-expert with `hidden_input_scale`: the library takes it only
    /// with the quantized input in SBUF.
    MxHiddenInputScale,
    /// MX all-expert `is_all_expert_dynamic` with more than one local expert.
    MxDynamicExperts,
    /// MX all-expert `is_all_expert_dynamic` with a `block_size` the library refuses.
    MxDynamicBlockSize,
    /// MX weights without both weight scales.
    MxScales,
    /// MX weights with `H` not a multiple of 512.
    MxHidden,
    /// MX weights with `I` neither a multiple of 512 nor below 512 and a multiple of 32.
    MxIntermediate,
    /// MX selective-expert: `K` does not split over the programs.
    MxTopK,
    /// MX without `POST_SCALE`.
    MxScalingMode,
    /// MX selective-expert with a down bias and more than 128 experts.
    MxBiasExperts,
    /// `is_all_expert_dynamic` without all-expert mode or a `block_size`.
    Dynamic,
    /// `mask_unselected_experts` with `is_all_expert_dynamic`.
    DynamicMask,
    /// `expert_affinities_eager` in all-expert mode.
    Eager,
    /// `output_in_sbuf` (not implemented).
    SbufOutput,
}

impl MoeTkgRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            MoeTkgRule::HiddenTiles => "moe_tkg: H must be a positive multiple of 128",
            MoeTkgRule::Sizes => "moe_tkg: T, I, E_L and K must be positive",
            MoeTkgRule::SelectiveTokens => "moe_tkg: the selective-expert path takes at most 128 tokens (T = batch size * seq len)",
            MoeTkgRule::Programs => "moe_tkg: runs on 1 or 2 programs (LNC1 or LNC2)",
            MoeTkgRule::HiddenShards => "moe_tkg: H / 128 must split evenly over the programs of the launch when the call shards H",
            MoeTkgRule::ScalingMode => "moe_tkg: expert_affinities_scaling_mode must be NO_SCALE or POST_SCALE",
            MoeTkgRule::RankId => "moe_tkg: rank_id is required for all-expert mode with affinity scaling",
            MoeTkgRule::StaticQuantization => "moe_tkg: static quantization (gate_up_input_scale, down_input_scale) is not supported",
            MoeTkgRule::RowScales => "moe_tkg: ROW quantization needs both expert_gate_up_weights_scale and expert_down_weights_scale",
            MoeTkgRule::HiddenInputScale => "moe_tkg: hidden_input_scale is only supported with MX weights in all-expert mode",
            MoeTkgRule::MxHiddenInputScale => {
                "moe_tkg: hidden_input_scale goes with a hidden_input quantized upstream and held in SBUF, which a launched kernel cannot take (its inputs are HBM tensors)"
            }
            MoeTkgRule::MxDynamicExperts => {
                "moe_tkg: the MX all-expert dynamic strategy (is_all_expert_dynamic) takes one local expert (E_L = 1)"
            }
            MoeTkgRule::MxDynamicBlockSize => {
                "moe_tkg: the MX all-expert dynamic strategy needs a block_size that divides T, is at most T / 2, and is a multiple of 8 below 32, of 32 below 128, else of 128"
            }
            MoeTkgRule::MxScales => "moe_tkg: MX weights need expert_gate_up_weights_scale and expert_down_weights_scale",
            MoeTkgRule::MxHidden => "moe_tkg: MX weights need H to be a multiple of 512",
            MoeTkgRule::MxIntermediate => "moe_tkg: MX weights need I to be a multiple of 512, or below 512 and a multiple of 32",
            MoeTkgRule::MxTopK => {
                "moe_tkg: the MX selective-expert path splits the top-k slots over the programs: K must be a multiple of them"
            }
            MoeTkgRule::MxScalingMode => {
                "moe_tkg: the MX paths always scale by the affinities: expert_affinities_scaling_mode must be POST_SCALE"
            }
            MoeTkgRule::MxBiasExperts => {
                "moe_tkg: with MX weights the down bias is weighted by all E affinities at once: E must be at most 128"
            }
            MoeTkgRule::Dynamic => "moe_tkg: is_all_expert_dynamic=True requires is_all_expert=True and a block_size",
            MoeTkgRule::DynamicMask => "moe_tkg: mask_unselected_experts is not supported with is_all_expert_dynamic=True",
            MoeTkgRule::Eager => "moe_tkg: expert_affinities_eager is not supported with is_all_expert=True",
            MoeTkgRule::SbufOutput => "moe_tkg: output_in_sbuf is not implemented (the output is an HBM tensor)",
        }
    }
}

/// A `moe_tkg` call as the rules read it: the sizes and the options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeTkgCall {
    /// `T`, the tokens.
    pub tokens: i64,
    /// `H`, the hidden size.
    pub hidden: i64,
    /// `I`, the intermediate size.
    pub intermediate: i64,
    /// `E_L`, the local experts.
    pub experts: i64,
    /// `K`, the experts each token selected.
    pub top_k: i64,
    /// The programs of the launch (its LNC size), 1 without a grid.
    pub programs: i64,
    /// `is_all_expert`.
    pub is_all_expert: bool,
    /// `expert_affinities_scaling_mode`.
    pub expert_affinities_scaling_mode: ExpertAffinityScaleMode,
    /// Whether `rank_id` is given.
    pub has_rank_id: bool,
    /// Whether `expert_gate_up_weights_scale` is given.
    pub has_gate_up_scale: bool,
    /// Whether `expert_down_weights_scale` is given.
    pub has_down_scale: bool,
    /// Whether `gate_up_input_scale` or `down_input_scale` is given.
    pub has_input_scales: bool,
    /// Whether the weights are an MX form (`float4_e2m1fn_x4`, `float8_e4m3fn_x4`).
    pub mx: bool,
    /// Whether `hidden_input_scale` is given.
    pub has_hidden_input_scale: bool,
    /// Whether `expert_down_bias` is given.
    pub has_down_bias: bool,
    /// `is_all_expert_dynamic`.
    pub is_all_expert_dynamic: bool,
    /// Whether `block_size` is given.
    pub has_block_size: bool,
    /// `block_size` when given.
    pub block_size: i64,
    /// `mask_unselected_experts`.
    pub mask_unselected_experts: bool,
    /// Whether `expert_affinities_eager` is given.
    pub has_eager: bool,
    /// `output_in_sbuf`.
    pub output_in_sbuf: bool,
}

impl MoeTkgCall {
    /// A call of these sizes with the kernel's defaults for every option.
    pub const fn new(tokens: i64, hidden: i64, intermediate: i64, experts: i64, top_k: i64, programs: i64, is_all_expert: bool) -> Self {
        MoeTkgCall {
            tokens,
            hidden,
            intermediate,
            experts,
            top_k,
            programs,
            is_all_expert,
            expert_affinities_scaling_mode: ExpertAffinityScaleMode::NO_SCALE,
            has_rank_id: false,
            has_gate_up_scale: false,
            has_down_scale: false,
            has_input_scales: false,
            mx: false,
            has_hidden_input_scale: false,
            has_down_bias: false,
            is_all_expert_dynamic: false,
            has_block_size: false,
            block_size: 0,
            mask_unselected_experts: false,
            has_eager: false,
            output_in_sbuf: false,
        }
    }
}

/// The first rule `c` breaks.
pub const fn moe_tkg_violation(c: MoeTkgCall) -> Option<MoeTkgRule> {
    if c.hidden <= 0 || c.hidden % H0 != 0 {
        return Some(MoeTkgRule::HiddenTiles);
    }
    if c.tokens <= 0 || c.intermediate <= 0 || c.experts <= 0 || c.top_k <= 0 {
        return Some(MoeTkgRule::Sizes);
    }
    if !c.is_all_expert && c.tokens > MAX_SELECTIVE_TOKENS {
        return Some(MoeTkgRule::SelectiveTokens);
    }
    if c.programs <= 0 || c.programs > 2 {
        return Some(MoeTkgRule::Programs);
    }
    let hidden_sharded = !c.mx && (c.is_all_expert || !selective_shards_tokens(c.tokens, c.hidden, c.intermediate, c.programs));
    if hidden_sharded && (c.hidden / H0) % c.programs != 0 {
        return Some(MoeTkgRule::HiddenShards);
    }
    if matches!(c.expert_affinities_scaling_mode, ExpertAffinityScaleMode::PRE_SCALE | ExpertAffinityScaleMode::PRE_SCALE_DELAYED) {
        return Some(MoeTkgRule::ScalingMode);
    }
    if c.is_all_expert && matches!(c.expert_affinities_scaling_mode, ExpertAffinityScaleMode::POST_SCALE) && !c.has_rank_id {
        return Some(MoeTkgRule::RankId);
    }
    if c.has_input_scales {
        return Some(MoeTkgRule::StaticQuantization);
    }
    if c.has_hidden_input_scale && !(c.mx && c.is_all_expert) {
        return Some(MoeTkgRule::HiddenInputScale);
    }
    if c.mx {
        if let Some(rule) = mx_violation(c) {
            return Some(rule);
        }
    } else if c.has_gate_up_scale != c.has_down_scale {
        return Some(MoeTkgRule::RowScales);
    }
    if c.is_all_expert_dynamic && (!c.is_all_expert || !c.has_block_size) {
        return Some(MoeTkgRule::Dynamic);
    }
    if c.is_all_expert_dynamic && c.mask_unselected_experts {
        return Some(MoeTkgRule::DynamicMask);
    }
    if c.is_all_expert && c.has_eager {
        return Some(MoeTkgRule::Eager);
    }
    if c.output_in_sbuf {
        return Some(MoeTkgRule::SbufOutput);
    }
    None
}

/// The first rule of the MX weight forms `c` breaks.
pub const fn mx_violation(c: MoeTkgCall) -> Option<MoeTkgRule> {
    if c.is_all_expert && c.has_hidden_input_scale {
        return Some(MoeTkgRule::MxHiddenInputScale);
    }
    if c.is_all_expert && c.is_all_expert_dynamic && c.experts != 1 {
        return Some(MoeTkgRule::MxDynamicExperts);
    }
    if c.is_all_expert && c.is_all_expert_dynamic && c.has_block_size && !mx_dynamic_block_size_ok(c.tokens, c.block_size) {
        return Some(MoeTkgRule::MxDynamicBlockSize);
    }
    if !c.has_gate_up_scale || !c.has_down_scale {
        return Some(MoeTkgRule::MxScales);
    }
    if c.hidden % MX_TILE != 0 {
        return Some(MoeTkgRule::MxHidden);
    }
    if !(c.intermediate % MX_TILE == 0 || (c.intermediate < MX_TILE && c.intermediate % SCALE_GROUP_SIZE == 0)) {
        return Some(MoeTkgRule::MxIntermediate);
    }
    if !c.is_all_expert && c.top_k % c.programs != 0 {
        return Some(MoeTkgRule::MxTopK);
    }
    if !matches!(c.expert_affinities_scaling_mode, ExpertAffinityScaleMode::POST_SCALE) {
        return Some(MoeTkgRule::MxScalingMode);
    }
    if !c.is_all_expert && c.has_down_bias && c.experts > MAX_MX_BIAS_EXPERTS {
        return Some(MoeTkgRule::MxBiasExperts);
    }
    None
}

/// The library's `_is_valid_block_size`: `block_size` divides `tokens`
/// into at least two blocks and is a multiple of 8 below 32, of 32 below
/// 128, else of 128 (the kernel asserts the same).
pub const fn mx_dynamic_block_size_ok(tokens: i64, block_size: i64) -> bool {
    let multiple = if block_size < 32 {
        8
    } else if block_size < 128 {
        32
    } else {
        128
    };
    block_size > 0 && tokens % block_size == 0 && block_size <= tokens / 2 && block_size % multiple == 0
}

/// A `moe_tkg` call checked at compile time, or a compile error naming the
/// rule it breaks. Options not given take the kernel's defaults.
///
/// ```
/// let c = nkilib::moe_tkg_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 8, top_k = 8, programs = 2, is_all_expert = true);
/// assert_eq!((c.tokens, c.experts), (4, 8));
/// ```
///
/// ```compile_fail
/// // The selective path holds at most 128 tokens.
/// let c = nkilib::moe_tkg_config!(tokens = 256, hidden = 512, intermediate = 128, experts = 4, top_k = 2, programs = 1, is_all_expert = false);
/// ```
#[macro_export]
macro_rules! moe_tkg_config {
    (tokens = $t:expr, hidden = $h:expr, intermediate = $i:expr, experts = $e:expr, top_k = $k:expr, programs = $p:expr, is_all_expert = $a:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::moe::moe_tkg::moe_tkg::MoeTkgCall = $crate::moe::moe_tkg::moe_tkg::MoeTkgCall {
            $($field: $v,)*
            ..$crate::moe::moe_tkg::moe_tkg::MoeTkgCall::new($t, $h, $i, $e, $k, $p, $a)
        };
        const _: () = if let Some(rule) = $crate::moe::moe_tkg::moe_tkg::moe_tkg_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}
