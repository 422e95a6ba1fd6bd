//! The NKI library's `moe_block_tkg`: a decode-phase MoE block, RMSNorm then
//! the router's top-k then the experts, on the two programs of an LNC2
//! launch.
//!
//! ```text
//! x       = rmsnorm(inp, gamma, eps, hidden_actual)            [T, H], inp's dtype
//! logits  = x @ router_weights (+ router_bias)                  [T, E]
//! aff     = act(logits) (softmax or sigmoid; before or after the top-k)
//! idx     = top_k experts of each token                          [T, K]
//! out     = moe_tkg(x, experts, aff, idx)                        [T, H], inp's dtype
//! ```
//!
//! Each phase is the ported kernel: [`rmsnorm_tkg`] writes the
//! `[128, T, H/128]` layout (single-core for more than one token on the
//! selective path, else split over the programs, as the library asks), whose
//! rows [`norm_rows`] gathers back to `[T, H]` (cast to `router_mm_dtype` for
//! the router); the router (`router_topk`'s configuration and pipeline
//! helpers) reads them in the layout the library's router reads its SBUF
//! input in ([`norm_layout`]: the order its float32 logits add the hidden
//! rows), shares the tokens between the programs on the
//! selective path with more than one token and writes `router_logits`
//! (inp's dtype), float32 affinities and uint32 indices; [`moe_tkg`] runs the
//! selective path (each token's top-k experts, `T <= 128`) or the all-expert
//! path (this rank's `E_L` local experts, `rank_id · E_L ..`, the affinities
//! of experts a token did not select masked when the router left them
//! unmasked: `router_pre_norm` without `norm_topk_prob`). The programs meet at
//! a core barrier after the norm and after the router, whose outputs are
//! shared HBM tensors, because each phase may split its rows between them.
//!
//! The MX weight forms (`float4_e2m1fn_x4`, `float8_e4m3fn_x4` with `uint8`
//! block scales, trn3) follow the library too: the norm writes the
//! `hidden_dim_tp` layout (`h = c·128 + p`) and the selective path runs
//! `moe_tkg`'s MX selective path on its rows; in all-expert mode
//! ([`mx_rmsnorm_phase`]) the fused `rmsnorm_mx_quantize_tkg` normalises
//! and quantizes every row to MXFP8 (adding `residual` first when given, and
//! returning the sum as a third output), the router shares the tokens and
//! broadcasts its bias by a matmul, and [`mx_all_expert_phase`] runs every
//! local expert on the pre-quantized rows (the library's `moe_tkg` with
//! `hidden_input_scale`), `T` a multiple of 4. As in the library's kernel,
//! the MX selective experts weight every expert's down bias by the
//! affinities the router stored (`expert_affinities @ down_bias`): with
//! `router_pre_norm` and without `norm_topk_prob` those are the activations
//! of every expert, unmasked, so the unselected experts' biases are added
//! too (the library's torch reference adds only the selected ones; this
//! port keeps the kernel's sums, which it equals bit for bit). In that same
//! mode (MX selective, `router_pre_norm` without `norm_topk_prob`) the
//! library's experts scale by the router's `return_eager_affi` output,
//! which its router leaves unwritten on that path: the library's result is
//! undefined there, and this port scales each selected expert by its
//! activation, the documented computation.
//!
//! The library keeps the norm's output and the router's inputs in SBUF; here
//! the kernels exchange HBM tensors (the values are the same). Refused by
//! name (see [`MoeBlockRule`]): the fused `residual` add outside the MX
//! all-expert path; a shared expert and
//! `hidden_act_scale_factor` / `hidden_act_bias` (placeholders the library
//! refuses too). `float8_e4m3` weights with both scales are `moe_tkg`'s
//! `ROW` quantization; without them (the library multiplies the fp8 weights
//! unscaled) `moe_tkg` refuses them.

use crate::moe::moe_tkg::moe_tkg::{MoeTkgCall, MoeTkgRule, moe_tkg_violation};
use crate::router_topk::router_topk::{
    RouterRule, RouterShape, X_HBM_LAYOUT_T_H, XSB_LAYOUT_TP102, XSB_LAYOUT_TP201, XSB_LAYOUT_TP2013, router_topk_violation,
};
use crate::subkernels::norm_tkg_utils::{NormTkgRule, NormTkgShape, norm_tkg_violation};
use crate::subkernels::rmsnorm_mx_quantize_tkg::{RmsNormMxRule, RmsNormMxShape, rmsnorm_mx_quantize_violation};

pub use kernel::*;

/// The entry and its phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::MLPActivationParameters;
    use crate::mlp::mlp_tkg::projection_mx_constants::MX_TILE;
    use crate::moe::moe_tkg::all_expert_mx_impl::all_expert_mx_static;
    use crate::moe::moe_tkg::moe_tkg::{check_tensors_mx, moe_tkg};
    use crate::moe::moe_tkg::moe_tkg_utils::{MoeTkgOptions, MoeTkgTensors};
    use crate::moe_block::moe_block_tkg_utils::{
        ExpertConfig, MoEBlockTKGDims, PMAX, QuantizationConfig, norm_rows, parse_moe_block_config,
    };
    use crate::router_topk::router_topk::{
        RouterFlags, RouterTensors, X_HBM_LAYOUT_T_H, XSB_LAYOUT_TP102, XSB_LAYOUT_TP201, XSB_LAYOUT_TP2013, check_router_inputs,
        router_topk_config, router_topk_pipeline,
    };
    use crate::subkernels::rmsnorm_mx_quantize_tkg::rmsnorm_mx_quantize_tkg;
    use crate::subkernels::rmsnorm_tkg::rmsnorm_tkg;
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode, QuantizationType, RouterActFnType};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// The programs the block runs on (LNC2).
    pub const N_PRGS: i64 = 2;
    /// The MX all-expert path's tokens come in multiples of this (the MX
    /// matmuls move four tokens' packed values at a time).
    pub const MX_TOKEN_MULTIPLE: i64 = 4;

    /// The router's outputs.
    #[nki_object]
    pub struct RouterOutputs {
        /// `[T, E]` logits, inp's dtype.
        pub router_logits: Tensor,
        /// `[T, K]` uint32 expert ids.
        pub expert_index: Tensor,
        /// `[T, E]` float32 affinities.
        pub expert_affinities: Tensor,
    }

    /// The router's options.
    #[nki_object]
    pub struct RouterOptions {
        /// Softmax or sigmoid.
        pub act_fn: RouterActFnType,
        /// Activation before the top-k.
        pub router_pre_norm: bool,
        /// Normalise the selected affinities.
        pub norm_topk_prob: bool,
        /// Leave `router_logits` unwritten.
        pub skip_router_logits: bool,
    }

    /// Whether the norm writes the single-core layout (the selective path
    /// with more than one token, whose router shares the tokens).
    #[nki_helper]
    pub fn selective_shard_on_t(dims: MoEBlockTKGDims, experts: ExpertConfig) -> bool {
        !experts.is_all_expert && dims.t > 1
    }

    /// The layout of the norm's rows, which the library's router reads
    /// them in (`x_sb_layout`): `h = c·128 + p` for the MX forms, one hidden
    /// shard when the norm runs single-core, else two.
    #[nki_helper]
    pub fn norm_layout(dims: MoEBlockTKGDims, quant: QuantizationConfig, experts: ExpertConfig) -> i64 {
        if quant.is_moe_weight_mx {
            XSB_LAYOUT_TP201
        } else if selective_shard_on_t(dims, experts) {
            XSB_LAYOUT_TP102
        } else {
            XSB_LAYOUT_TP2013
        }
    }

    /// The block's own rules (the phases' kernels check theirs).
    #[nki_helper]
    pub fn validate_moe_block_inputs(
        dims: MoEBlockTKGDims,
        quant: QuantizationConfig,
        experts: ExpertConfig,
        has_rank_id: bool,
        has_residual: bool,
        router_mm_dtype: Dtype,
    ) {
        let (h, t) = (dims.h, dims.t);
        let mx_all = quant.is_moe_weight_mx && experts.is_all_expert;
        assert!(h % PMAX == 0, "moe_block_tkg: H = {h} must be a multiple of 128");
        assert!(dims.n_prgs == N_PRGS, "moe_block_tkg: runs on the 2 programs of an LNC2 launch, got {}", dims.n_prgs);
        assert!(h % (PMAX * N_PRGS) == 0, "moe_block_tkg: H = {h} must be a multiple of 256 (128 partitions times 2 programs)");
        assert!(experts.is_all_expert || t <= PMAX, "moe_block_tkg: the selective-expert path takes at most 128 tokens, got T = {t}");
        assert!(!experts.has_shared_expert, "moe_block_tkg: a shared expert is not supported (shared_expert_*_w)");
        assert!(!experts.is_all_expert || has_rank_id, "moe_block_tkg: rank_id is required with is_all_expert=True");
        assert!(!mx_all || t % MX_TOKEN_MULTIPLE == 0, "moe_block_tkg: the MX all-expert path needs T to be a multiple of 4, got T = {t}");
        assert!(!has_residual || mx_all, "moe_block_tkg: the fused residual add is only supported with MX weights in all-expert mode");
        assert!(
            router_mm_dtype == nl::bfloat16 || router_mm_dtype == nl::float16 || router_mm_dtype == nl::float32,
            "moe_block_tkg: router_mm_dtype must be bfloat16, float16 or float32, got {router_mm_dtype}"
        );
    }

    /// RMSNorm of `inp` into a shared `[128, T, H/128]` tensor (the library's
    /// flags: `hidden_dim_tp` for the MX forms, single-core on the selective
    /// path with more than one token), both programs' rows stored before it
    /// is read.
    #[nki_helper]
    pub fn rmsnorm_phase(dims: MoEBlockTKGDims, quant: QuantizationConfig, experts: ExpertConfig, inp: Hbm, gamma: Hbm, eps: f64) -> Hbm {
        let norm = nl::ndarray([PMAX, dims.t, dims.h_free], inp.dtype(), buffer = nl::shared_hbm);
        let tp = quant.is_moe_weight_mx;
        let single = !tp && selective_shard_on_t(dims, experts);
        let ha = Some(dims.hidden_actual);
        let _ = rmsnorm_tkg(inp, gamma, norm, eps = eps, hidden_actual = ha, hidden_dim_tp = tp, single_core_forced = single);
        nisa::core_barrier(norm, [0, 1]);
        norm
    }

    /// The fused norm of the MX all-expert path.
    #[nki_object]
    pub struct MxNormOutputs {
        /// The normalised rows `[128, T, H/128]` (`h = c·128 + p`), inp's dtype.
        pub norm: Tensor,
        /// Their MXFP8 words `[128, H/512, T]`.
        pub quant: Tensor,
        /// Their block scales `[128, H/512, T]`.
        pub scale: Tensor,
        /// `inp + residual` `[T, H]`, when a residual is given.
        pub residual_out: Option<Tensor>,
    }

    /// The MX all-expert path's `rmsnorm_mx_quantize_tkg` (with the fused
    /// residual add when `residual` is given): every row normalised and
    /// quantized, held by both programs in SBUF.
    #[nki_helper(target = "trn3")]
    pub fn mx_rmsnorm_phase(dims: MoEBlockTKGDims, inp: Hbm, gamma: Hbm, residual: Option<Hbm>, eps: f64) -> MxNormOutputs {
        let norm = nl::ndarray([PMAX, dims.t, dims.h_free], inp.dtype(), buffer = nl::sbuf);
        let quant = nl::ndarray([PMAX, dims.h / MX_TILE, dims.t], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let scale = nl::ndarray([PMAX, dims.h / MX_TILE, dims.t], nl::uint8, buffer = nl::sbuf);
        let mut residual_out: Option<Hbm> = None;
        if residual.is_some() {
            residual_out = Some(nl::ndarray([dims.t, dims.h], inp.dtype(), buffer = nl::shared_hbm));
        }
        let ha = Some(dims.hidden_actual);
        rmsnorm_mx_quantize_tkg(inp, gamma, norm, quant, scale, residual, residual_out, eps, ha, true);
        MxNormOutputs { norm, quant, scale, residual_out }
    }

    /// The router on the token rows `x` `[T, H]` (`router_mm_dtype`), read
    /// in the norm's layout: the tokens shared between the programs on the
    /// MX all-expert path and on the selective path with more than one token
    /// (where the MX all-expert path also broadcasts the bias by a matmul),
    /// both programs' outputs stored before they are read.
    #[nki_helper]
    pub fn router_phase(
        dims: MoEBlockTKGDims,
        quant: QuantizationConfig,
        experts: ExpertConfig,
        x: Hbm,
        w: Hbm,
        w_bias: Option<Hbm>,
        opts: RouterOptions,
        io: Dtype,
    ) -> RouterOutputs {
        let router_logits = nl::ndarray([dims.t, dims.e], io, buffer = nl::shared_hbm);
        let expert_index = nl::ndarray([dims.t, dims.k], nl::uint32, buffer = nl::shared_hbm);
        let expert_affinities = nl::ndarray([dims.t, dims.e], nl::float32, buffer = nl::shared_hbm);
        let mx_all = quant.is_moe_weight_mx && experts.is_all_expert;
        let shard = mx_all || selective_shard_on_t(dims, experts);
        let io = RouterTensors { x, w, w_bias, router_logits, expert_affinities, expert_index };
        let sb_layout = norm_layout(dims, quant, experts);
        check_router_inputs(io, opts.act_fn, dims.k, X_HBM_LAYOUT_T_H, sb_layout, opts.router_pre_norm, false, false);
        let flags = RouterFlags {
            router_pre_norm: opts.router_pre_norm,
            norm_topk_prob: opts.norm_topk_prob,
            use_column_tiling: true,
            use_indirect_dma_scatter: false,
            return_eager_affi: false,
            use_PE_broadcast_w_bias: mx_all,
            shard_on_tokens: shard,
            skip_store_expert_index: experts.is_all_expert && !opts.router_pre_norm,
            skip_store_router_logits: opts.skip_router_logits,
        };
        // The router reads the rows in the order of the norm's layout, as the
        // library's router reads its SBUF input (its float32 sums follow it).
        let cfg = router_topk_config(io, opts.act_fn, dims.k, X_HBM_LAYOUT_T_H, sb_layout, flags);
        let _ = router_topk_pipeline(cfg, io);
        nisa::core_barrier(expert_index, [0, 1]);
        nisa::core_barrier(expert_affinities, [0, 1]);
        RouterOutputs { router_logits, expert_index, expert_affinities }
    }

    /// The MX all-expert path's experts on the pre-quantized rows `q` (the
    /// library's `moe_tkg` with `hidden_input_scale`): `w.hidden_input`
    /// `[T, H]` names the rows' shape and dtype for the checks and the
    /// output, `w` holds the weights and the router's outputs.
    #[nki_helper(target = "trn3")]
    pub fn mx_all_expert_phase(q: MxNormOutputs, w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, output_dtype: Dtype) -> Hbm {
        check_tensors_mx(w, true, opts.expert_affinities_scaling_mode, N_PRGS);
        let output = nl::ndarray(w.hidden_input.shape(), output_dtype, buffer = nl::shared_hbm);
        all_expert_mx_static(w, opts, rank_id, q.quant, q.scale, output);
        output
    }

    /// The block's input and the weights every call needs.
    #[nki_params]
    pub struct MoeBlockTensors {
        /// Active input `[B, S, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub inp: Hbm,
        /// The RMSNorm's gamma `[1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gamma: Hbm,
        /// Router weights `[H, E]`.
        #[dtypes(float32, bfloat16, float16)]
        pub router_weights: Hbm,
        /// Fused gate/up weights `[E, H, 2, I]` (or their MX form).
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4)]
        pub expert_gate_up_weights: Hbm,
        /// Down weights `[E, I, H]` (or their MX form).
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4)]
        pub expert_down_weights: Hbm,
    }

    /// The optional tensors: a shared expert's weights (the library's
    /// placeholder, refused when given), the experts' MX weight scales
    /// (required with MX weights), the router's and the experts' biases, and
    /// the shared expert's biases (placeholders, not read).
    #[nki_params]
    pub struct MoeBlockOptionalTensors {
        /// Shared expert gate weights `[H, I]`.
        pub shared_expert_gate_w: Option<Hbm>,
        /// Shared expert up weights `[H, I]`.
        pub shared_expert_up_w: Option<Hbm>,
        /// Shared expert down weights `[I, H]`.
        pub shared_expert_down_w: Option<Hbm>,
        /// The gate/up weights' MX block scales.
        #[dtypes(float32, uint8)]
        pub expert_gate_up_weights_scale: Option<Hbm>,
        /// The down weights' MX block scales.
        #[dtypes(float32, uint8)]
        pub expert_down_weights_scale: Option<Hbm>,
        /// Router bias `[1, E]`.
        #[dtypes(float32, bfloat16, float16)]
        pub router_bias: Option<Hbm>,
        /// Gate/up bias `[E, 2, I]` (or its MX form).
        #[dtypes(float32, bfloat16, float16)]
        pub expert_gate_up_bias: Option<Hbm>,
        /// Down bias `[E, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub expert_down_bias: Option<Hbm>,
        /// Shared expert gate bias `[1, I]`.
        pub shared_expert_gate_bias: Option<Hbm>,
        /// Shared expert up bias `[1, I]`.
        pub shared_expert_up_bias: Option<Hbm>,
        /// Shared expert down bias `[1, H]`.
        pub shared_expert_down_bias: Option<Hbm>,
    }

    /// How the router chooses the experts and how their affinities apply.
    #[nki_params]
    pub struct MoeBlockRouting {
        /// Experts per token.
        #[default(1)]
        pub top_k: i64,
        /// Softmax or sigmoid of the router logits.
        #[default(RouterActFnType::SIGMOID)]
        pub router_act_fn: RouterActFnType,
        /// The activation before the top-k (else after it).
        #[default(true)]
        pub router_pre_norm: bool,
        /// Normalise the top-k affinities.
        #[default(false)]
        pub norm_topk_prob: bool,
        /// Whether each expert's output is multiplied by its affinity.
        #[default(ExpertAffinityScaleMode::NO_SCALE)]
        pub expert_affinities_scaling_mode: ExpertAffinityScaleMode,
    }

    /// The experts' activation (its scale and bias the library's placeholders).
    #[nki_params]
    pub struct HiddenActivation {
        /// The gate projection's activation.
        #[default(ActFnType::SiLU)]
        pub hidden_act_fn: ActFnType,
        /// Placeholder: must be `None`.
        pub hidden_act_scale_factor: Option<f64>,
        /// Placeholder: must be `None`.
        pub hidden_act_bias: Option<f64>,
    }

    /// The trailing options: the router's matmul dtype, the norm's width, the
    /// outputs, the expert mode and the fused residual add.
    #[nki_params]
    pub struct MoeBlockOptions {
        /// The router matmul's dtype (the rows cast when it differs from `inp`'s).
        #[default(nl::bfloat16)]
        pub router_mm_dtype: Dtype,
        /// The RMSNorm's width when `H` is padded.
        pub hidden_actual: Option<i64>,
        /// Return no router logits.
        #[default(false)]
        pub skip_router_logits: bool,
        /// All-expert mode (else selective-expert).
        #[default(false)]
        pub is_all_expert: bool,
        /// `[1, 1]` rank (all-expert mode).
        #[dtypes(int32, uint32)]
        pub rank_id: Option<Hbm>,
        /// `[B, S, H]` residual added first (MX all-expert mode).
        pub residual: Option<Hbm>,
    }

    /// The MoE block of `inp` `[B, S, H]`: RMSNorm with `gamma` `[1, H]`,
    /// the router `router_weights` `[H, E]` choosing `top_k` experts, the
    /// experts `[E_L, H, 2, I]` / `[E_L, I, H]` (or their MX forms); returns
    /// `out` `[T, H]`, then `router_logits` `[T, E]` unless
    /// `skip_router_logits`, then `inp + residual` `[T, H]` when `residual`
    /// is given (module docs).
    #[nki_kernel]
    pub fn moe_block_tkg(
        #[spread] _: MoeBlockTensors,
        #[spread] _: MoeBlockOptionalTensors,
        #[default(1e-6)] eps: f64,
        #[spread] _: MoeBlockRouting,
        #[spread] _: HiddenActivation,
        #[spread] clamps: ClampLimits,
        #[spread] _: MoeBlockOptions,
    ) -> Outputs {
        // The shared expert (refused below when given) is the library's placeholder.
        let _ = (shared_expert_up_w, shared_expert_down_w, shared_expert_gate_bias, shared_expert_up_bias, shared_expert_down_bias);
        let dims = parse_moe_block_config(inp, router_weights, top_k, hidden_actual);
        let experts = ExpertConfig { is_all_expert, has_shared_expert: shared_expert_gate_w.is_some() };
        let gu_dtype = expert_gate_up_weights.dtype();
        let quant = QuantizationConfig { is_moe_weight_mx: gu_dtype == nl::float4_e2m1fn_x4 || gu_dtype == nl::float8_e4m3fn_x4 };
        validate_moe_block_inputs(dims, quant, experts, rank_id.is_some(), residual.is_some(), router_mm_dtype);
        assert!(
            hidden_act_scale_factor.is_none() && hidden_act_bias.is_none(),
            "moe_block_tkg: hidden_act_scale_factor and hidden_act_bias are placeholders and must be None"
        );
        let opts = RouterOptions { act_fn: router_act_fn, router_pre_norm, norm_topk_prob, skip_router_logits };
        // The router masks the unselected experts itself after the top-k or
        // with norm_topk_prob.
        let mask_unselected_experts = router_pre_norm && !norm_topk_prob;

        if quant.is_moe_weight_mx && is_all_expert {
            // Step 1: the fused norm and MX quantization (and residual add).
            let q = mx_rmsnorm_phase(dims, inp, gamma, residual, eps);
            // Step 2: the router on the normalised rows.
            let x_router = norm_rows(q.norm, XSB_LAYOUT_TP201, router_mm_dtype);
            let r = router_phase(dims, quant, experts, x_router, router_weights, router_bias, opts, inp.dtype());
            // Step 4: every local expert on the quantized rows. The experts
            // read those only; `hidden_input` names their [T, H] shape and
            // dtype for the checks and the output (the norm keeps inp's dtype).
            let w = MoeTkgTensors {
                hidden_input: inp.reshape([dims.t, dims.h]),
                expert_gate_up_weights,
                expert_down_weights,
                expert_affinities: r.expert_affinities,
                expert_index: r.expert_index,
                rank_id,
                expert_gate_up_bias,
                expert_down_bias,
                expert_gate_up_weights_scale,
                expert_down_weights_scale,
            };
            let act = MLPActivationParameters { activation_fn: hidden_act_fn, skip_gate_proj: false, clamps };
            let eopts =
                MoeTkgOptions { expert_affinities_scaling_mode, mask_unselected_experts, quantization_type: QuantizationType::MX, act };
            let rank: Hbm = rank_id.unwrap_or(inp);
            let out = mx_all_expert_phase(q, w, eopts, rank, inp.dtype());
            let residual_out = q.residual_out;
            if let Some(res) = residual_out {
                if skip_router_logits {
                    return Outputs(out, res);
                }
                return Outputs(out, r.router_logits, res);
            }
            if skip_router_logits {
                return Outputs(out);
            }
            return Outputs(out, r.router_logits);
        }

        // Step 1: RMSNorm, its rows gathered back for the router and the experts.
        let norm = rmsnorm_phase(dims, quant, experts, inp, gamma, eps);
        let layout = norm_layout(dims, quant, experts);
        let x = norm_rows(norm, layout, inp.dtype());
        let mut x_router = x;
        if router_mm_dtype != inp.dtype() {
            x_router = norm_rows(norm, layout, router_mm_dtype);
        }

        // Step 2: the router and the top-k.
        let r = router_phase(dims, quant, experts, x_router, router_weights, router_bias, opts, inp.dtype());

        // Step 3 (a shared expert) is refused above. Step 4: the experts.
        let out = moe_tkg(
            x,
            expert_gate_up_weights,
            expert_down_weights,
            r.expert_affinities,
            r.expert_index,
            is_all_expert,
            rank_id = rank_id,
            expert_gate_up_bias = expert_gate_up_bias,
            expert_down_bias = expert_down_bias,
            expert_gate_up_weights_scale = expert_gate_up_weights_scale,
            expert_down_weights_scale = expert_down_weights_scale,
            mask_unselected_experts = mask_unselected_experts,
            expert_affinities_scaling_mode = expert_affinities_scaling_mode,
            activation_fn = hidden_act_fn,
            output_dtype = Some(inp.dtype()),
            gate_clamp_upper_limit = gate_clamp_upper_limit,
            gate_clamp_lower_limit = gate_clamp_lower_limit,
            up_clamp_upper_limit = up_clamp_upper_limit,
            up_clamp_lower_limit = up_clamp_lower_limit,
        );
        if skip_router_logits {
            return Outputs(out);
        }
        Outputs(out, r.router_logits)
    }
}

/// Why a `moe_block_tkg` call is refused: its own rules, then the first rule
/// of a phase's kernel the call breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeBlockRule {
    /// `H` is not a positive multiple of 128.
    Hidden,
    /// Not the two programs of an LNC2 launch.
    Programs,
    /// `H` is not a multiple of 256 (128 partitions times two programs).
    HiddenShards,
    /// More than 128 tokens on the selective-expert path.
    SelectiveTokens,
    /// A shared expert (not supported, as in the library).
    SharedExpert,
    /// All-expert mode without `rank_id`.
    RankId,
    /// `residual` without MX weights in all-expert mode (the fused add is that path's).
    Residual,
    /// The MX all-expert path with `T` not a multiple of 4.
    MxTokens,
    /// `hidden_act_scale_factor` or `hidden_act_bias` (placeholders).
    ActPlaceholders,
    /// `router_mm_dtype` is not bfloat16, float16 or float32.
    RouterDtype,
    /// A rule of the norm (`rmsnorm_tkg`).
    Norm(NormTkgRule),
    /// A rule of the MX all-expert path's fused norm (`rmsnorm_mx_quantize_tkg`).
    MxNorm(RmsNormMxRule),
    /// A rule of the router (`router_topk`).
    Router(RouterRule),
    /// A rule of the experts (`moe_tkg`).
    Experts(MoeTkgRule),
}

impl MoeBlockRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            MoeBlockRule::Hidden => "moe_block_tkg: H must be a positive multiple of 128",
            MoeBlockRule::Programs => "moe_block_tkg: runs on the 2 programs of an LNC2 launch",
            MoeBlockRule::HiddenShards => "moe_block_tkg: H must be a multiple of 256 (128 partitions times 2 programs)",
            MoeBlockRule::SelectiveTokens => "moe_block_tkg: the selective-expert path takes at most 128 tokens",
            MoeBlockRule::SharedExpert => "moe_block_tkg: a shared expert is not supported (shared_expert_*_w)",
            MoeBlockRule::RankId => "moe_block_tkg: rank_id is required with is_all_expert=True",
            MoeBlockRule::Residual => "moe_block_tkg: the fused residual add is only supported with MX weights in all-expert mode",
            MoeBlockRule::MxTokens => "moe_block_tkg: the MX all-expert path needs T to be a multiple of 4",
            MoeBlockRule::ActPlaceholders => "moe_block_tkg: hidden_act_scale_factor and hidden_act_bias are placeholders and must be None",
            MoeBlockRule::RouterDtype => "moe_block_tkg: router_mm_dtype must be bfloat16, float16 or float32",
            MoeBlockRule::Norm(r) => r.message(),
            MoeBlockRule::MxNorm(r) => r.message(),
            MoeBlockRule::Router(r) => r.message(),
            MoeBlockRule::Experts(r) => r.message(),
        }
    }
}

/// A `moe_block_tkg` call as the rules read it: the sizes and the options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeBlockCall {
    /// `T = B · S`.
    pub tokens: i64,
    /// `H`.
    pub hidden: i64,
    /// `hidden_actual`, 0 for none.
    pub hidden_actual: i64,
    /// `I`.
    pub intermediate: i64,
    /// `E`, the router's (global) experts.
    pub experts: i64,
    /// `E_L`, the local experts of the weights.
    pub local_experts: i64,
    /// `top_k`.
    pub top_k: i64,
    /// The programs of the launch.
    pub programs: i64,
    /// `eps`.
    pub eps: f64,
    /// `is_all_expert`.
    pub is_all_expert: bool,
    /// `router_act_fn`.
    pub router_act_fn: RouterActFnType,
    /// `router_pre_norm`.
    pub router_pre_norm: bool,
    /// `expert_affinities_scaling_mode`.
    pub expert_affinities_scaling_mode: ExpertAffinityScaleMode,
    /// Whether `router_mm_dtype` is bfloat16, float16 or float32.
    pub router_mm_dtype_supported: bool,
    /// Whether a shared expert's weights are given.
    pub has_shared_expert: bool,
    /// Whether `rank_id` is given.
    pub has_rank_id: bool,
    /// Whether `residual` is given.
    pub has_residual: bool,
    /// Whether `hidden_act_scale_factor` or `hidden_act_bias` is given.
    pub has_act_placeholders: bool,
    /// Whether the expert weights are an MX form.
    pub mx: bool,
    /// Whether `inp` is bfloat16 or float16 (the MX forms quantize 16-bit rows).
    pub inp_16bit: bool,
    /// Whether `expert_gate_up_weights_scale` is given.
    pub has_gate_up_scale: bool,
    /// Whether `expert_down_weights_scale` is given.
    pub has_down_scale: bool,
}

impl MoeBlockCall {
    /// A call of these sizes on an LNC2 launch with the kernel's defaults
    /// for every option (`router_act_fn` SIGMOID, `router_pre_norm`, NO_SCALE).
    pub const fn new(tokens: i64, hidden: i64, intermediate: i64, experts: i64, local_experts: i64, top_k: i64) -> Self {
        MoeBlockCall {
            tokens,
            hidden,
            hidden_actual: 0,
            intermediate,
            experts,
            local_experts,
            top_k,
            programs: 2,
            eps: 1e-6,
            is_all_expert: false,
            router_act_fn: RouterActFnType::SIGMOID,
            router_pre_norm: true,
            expert_affinities_scaling_mode: ExpertAffinityScaleMode::NO_SCALE,
            router_mm_dtype_supported: true,
            has_shared_expert: false,
            has_rank_id: false,
            has_residual: false,
            has_act_placeholders: false,
            mx: false,
            inp_16bit: true,
            has_gate_up_scale: false,
            has_down_scale: false,
        }
    }
}

/// The first rule `c` breaks: the block's own, then the norm's, the
/// router's and the experts' for the calls the block makes.
pub const fn moe_block_violation(c: MoeBlockCall) -> Option<MoeBlockRule> {
    if c.hidden <= 0 || c.hidden % 128 != 0 {
        return Some(MoeBlockRule::Hidden);
    }
    if c.programs != 2 {
        return Some(MoeBlockRule::Programs);
    }
    if c.hidden % 256 != 0 {
        return Some(MoeBlockRule::HiddenShards);
    }
    if !c.is_all_expert && c.tokens > 128 {
        return Some(MoeBlockRule::SelectiveTokens);
    }
    if c.has_shared_expert {
        return Some(MoeBlockRule::SharedExpert);
    }
    if c.is_all_expert && !c.has_rank_id {
        return Some(MoeBlockRule::RankId);
    }
    let mx_all = c.mx && c.is_all_expert;
    if mx_all && c.tokens % MX_TOKEN_MULTIPLE != 0 {
        return Some(MoeBlockRule::MxTokens);
    }
    if c.has_residual && !mx_all {
        return Some(MoeBlockRule::Residual);
    }
    if c.has_act_placeholders {
        return Some(MoeBlockRule::ActPlaceholders);
    }
    if !c.router_mm_dtype_supported {
        return Some(MoeBlockRule::RouterDtype);
    }
    let shard_on_t = !c.is_all_expert && c.tokens > 1;
    if mx_all {
        let norm = RmsNormMxShape {
            bxs: c.tokens,
            hidden: c.hidden,
            hidden_actual: if c.hidden_actual == 0 { c.hidden } else { c.hidden_actual },
            eps: c.eps,
            hidden_dim_tp: true,
            output_16bit: c.inp_16bit,
            residual: c.has_residual,
            output_residual: c.has_residual,
            programs: c.programs,
        };
        if let Some(r) = rmsnorm_mx_quantize_violation(norm) {
            return Some(MoeBlockRule::MxNorm(r));
        }
    } else {
        let norm = NormTkgShape {
            bxs: c.tokens,
            hidden: c.hidden,
            hidden_actual: c.hidden_actual,
            eps: c.eps,
            hidden_dim_tp: c.mx,
            single_core_forced: !c.mx && shard_on_t,
            shard_on_h: false,
            programs: c.programs,
        };
        if let Some(r) = norm_tkg_violation(norm) {
            return Some(MoeBlockRule::Norm(r));
        }
    }
    let router_shards = mx_all || shard_on_t;
    let router = RouterShape {
        t: c.tokens,
        h: c.hidden,
        e: c.experts,
        k: c.top_k,
        act_fn: c.router_act_fn,
        x_hbm_layout: X_HBM_LAYOUT_T_H,
        x_sb_layout: if c.mx {
            XSB_LAYOUT_TP201
        } else if shard_on_t {
            XSB_LAYOUT_TP102
        } else {
            XSB_LAYOUT_TP2013
        },
        router_pre_norm: c.router_pre_norm,
        use_indirect_dma_scatter: false,
        return_eager_affi: false,
        programs: if router_shards { c.programs } else { 1 },
    };
    if let Some(r) = router_topk_violation(router) {
        return Some(MoeBlockRule::Router(r));
    }
    let experts = MoeTkgCall {
        expert_affinities_scaling_mode: c.expert_affinities_scaling_mode,
        has_rank_id: c.has_rank_id,
        has_gate_up_scale: c.has_gate_up_scale,
        has_down_scale: c.has_down_scale,
        mx: c.mx,
        ..MoeTkgCall::new(c.tokens, c.hidden, c.intermediate, c.local_experts, c.top_k, c.programs, c.is_all_expert)
    };
    if let Some(r) = moe_tkg_violation(experts) {
        return Some(MoeBlockRule::Experts(r));
    }
    None
}

/// A `moe_block_tkg` call checked at compile time, or a compile error naming
/// the rule it breaks. Options not given take the kernel's defaults
/// ([`MoeBlockCall::new`]).
///
/// ```
/// let c = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4);
/// assert_eq!((c.tokens, c.programs), (4, 2));
/// ```
///
/// ```compile_fail
/// // The selective path holds at most 128 tokens.
/// let c = nkilib::moe_block_config!(tokens = 256, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4);
/// ```
#[macro_export]
macro_rules! moe_block_config {
    (tokens = $t:expr, hidden = $h:expr, intermediate = $i:expr, experts = $e:expr, local_experts = $el:expr, top_k = $k:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::moe_block::moe_block_tkg::MoeBlockCall = $crate::moe_block::moe_block_tkg::MoeBlockCall {
            $($field: $v,)*
            ..$crate::moe_block::moe_block_tkg::MoeBlockCall::new($t, $h, $i, $e, $el, $k)
        };
        const _: () = if let Some(rule) = $crate::moe_block::moe_block_tkg::moe_block_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}
