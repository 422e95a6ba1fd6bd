//! The NKI library's `mlp` kernel: `down(act(gate(x)) · up(x))` of
//! (optionally residual-added and normalised) hidden rows. Like the library it
//! dispatches on the token count: `B·S <= TKG_BS_SEQLEN_THRESHOLD` (and
//! `force_cte_mode` off) runs the decode-phase (token generation) path,
//! [`mlp_tkg`](crate::mlp::mlp_tkg::mlp_tkg), the library's `mlp_tkg/`
//! folder; larger calls run the context-encoding path,
//! [`mlp_cte`](crate::mlp::mlp_cte::mlp_cte), its `mlp_cte/` folder. Each
//! path's module docs give its algorithm, loops and tiling.
//!
//! The kernel takes the library's signature, parameter names, order and
//! defaults (`activation_fn` a member of the library's [`ActFnType`],
//! `normalization_type` of [`NormType`], `quantization_type` of
//! [`QuantizationType`]), except the trailing `sbm` (the library's SBUF
//! allocator; tiles are placed by the compiler here). It allocates the output
//! `[B, S, H]` (in `output_dtype`, hidden's dtype by default) and, with a
//! stored residual add, the sum, and returns them (a tuple where the library
//! returns a list). Implemented on both paths: `NO_NORM`, `RMS_NORM`,
//! `RMS_NORM_SKIP_GAMMA`, `LAYER_NORM` (with or without bias), the four
//! activations, `skip_gate_proj`, the three projection biases, the fused
//! residual add (stored or not), 2-D `[T, H]` or 3-D hidden in HBM, one
//! program or an LNC2 launch, and fp8 quantization (`QuantizationType.STATIC`
//! and `ROW`, `float8_e4m3` gate, up and down weights with float32
//! `gate_w_scale`, `up_w_scale`, `down_w_scale`) in each path's form: the
//! decode path multiplies 16-bit hidden rows by the fp8 weights (see
//! [`mlp_tkg`](crate::mlp::mlp_tkg::mlp_tkg)); the context-encoding path takes
//! hidden rows already quantized to `float8_e4m3` (`STATIC`: `[B, S, H]` with
//! `gate_up_in_scale`; `ROW`: `[B, S, H + 4]`, each row's fp32 scale in its
//! last four bytes), requantizes the gated product (`STATIC` by
//! `down_in_scale`; `ROW` per row, after clipping to `quant_clipping_bound`)
//! and takes no norm, residual add or projection bias with them, as the
//! library's (see [`mlp_cte`](crate::mlp::mlp_cte::mlp_cte)). On the decode
//! path only (as in the library) the four clamps and the down weights in the
//! `use_tkg_down_proj_optimized_layout` layout. `QuantizationType.MX`
//! (trn3, decode only) runs the library's MX path,
//! [`mlp_tkg_mx`](crate::mlp::mlp_tkg::mlp_tkg_mx::mlp_tkg_mx): MXFP4/MXFP8
//! weights with `uint8` block scales, the activations quantized on chip.
//! `QuantizationType.STATIC_MX` (trn3, context encoding) takes the `STATIC`
//! form's fp8 rows, weights and scales with the weights in the library's
//! documented pre-shuffled layouts and multiplies them by `nc_matmul_mx`
//! ([`mlp_cte_mx`](crate::mlp::mlp_cte::mlp_cte_mx)).
//! Refused with a message naming the option: `ROW_MX` (as by the library),
//! `store_output_in_sbuf`, and the decode-only options on the
//! context-encoding path. The rules are
//! [`mlp_violation`](crate::mlp::mlp_parameters::mlp_violation).

use nki::prelude::*;

pub use kernel::*;

/// The kernel (the dispatcher) and its argument checks.
#[nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte::mlp_cte;
    use crate::mlp::mlp_cte::mlp_cte_sharding::shard_on_intermediate;
    use crate::mlp::mlp_parameters::{
        DOWN_PSUM_BANKS, H0, MLPActivationParameters, MLPParameters, MLPQuantizationParameters, MLPTensors, MlpOutputOptions,
        MlpTkgOptions, ROW_SCALE_BYTES, TKG_BS_SEQLEN_THRESHOLD,
    };
    use crate::mlp::mlp_tkg::mlp_tkg::mlp_tkg;
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{PSUM_BMAX, PSUM_FMAX};
    use crate::mlp::mlp_tkg::mlp_tkg_mx::mlp_tkg_mx;
    use crate::mlp::mlp_tkg::projection_mx_constants::{GROUPS_PER_MX_TILE, MX_TILE};
    pub use crate::utils::common_types::{ActFnType, NormType, QuantizationType};
    use crate::utils::kernel_helpers::{ClampLimits, any_clamp};
    use crate::utils::mx_layout::{MX_GROUP_PARTITIONS, MX_PACK, SCALE_GROUP_SIZE};
    use nki::prelude::*;

    /// `store_output_in_sbuf` refused.
    pub const STORE_OUTPUT_IN_SBUF: &str = "mlp: store_output_in_sbuf is not implemented (the output is an HBM tensor)";

    /// The call's tensors as the phases read them: without a norm its gamma
    /// and beta are dropped, as the library's `MLPNormalizationParameters`
    /// drops them.
    #[nki_helper]
    pub fn phase_tensors(t: MLPTensors, normalization_type: NormType) -> MLPTensors {
        let has_norm = normalization_type != NormType::NO_NORM;
        MLPTensors {
            gate_proj_weights_tensor: t.gate_proj_weights_tensor,
            up_proj_weights_tensor: t.up_proj_weights_tensor,
            down_proj_weights_tensor: t.down_proj_weights_tensor,
            normalization_weights_tensor: if has_norm { t.normalization_weights_tensor } else { None },
            gate_proj_bias_tensor: t.gate_proj_bias_tensor,
            up_proj_bias_tensor: t.up_proj_bias_tensor,
            down_proj_bias_tensor: t.down_proj_bias_tensor,
            normalization_bias_tensor: if has_norm { t.normalization_bias_tensor } else { None },
            fused_add_tensor: t.fused_add_tensor,
        }
    }

    /// Asserts that an optional `[1, n]` tensor has that shape.
    #[nki_helper]
    pub fn check_row(t: Option<Hbm>, name: &str, n: i64) {
        if let Some(v) = t {
            let shape = v.shape();
            assert!(v.ndim() == 2 && shape[0] == 1 && shape[1] == n, "mlp: {name} must be [1, {n}], got {shape}");
        }
    }

    /// The decode path's own rules: the hidden dim splits evenly over the
    /// programs, and without down column tiling the shard's output columns
    /// fit the PSUM banks.
    #[nki_helper]
    pub fn validate_mlp_tkg(t: i64, h: i64, programs: i64, down_column_tiling: bool) {
        assert!((h / H0) % programs == 0, "mlp: H / 128 = {} must split evenly over the {programs} programs of the launch", h / H0);
        assert!(down_column_tiling || (h / H0 / programs).div_ceil(PSUM_FMAX / t) <= PSUM_BMAX, DOWN_PSUM_BANKS);
    }

    /// The context-encoding path's own rules: no clamps and no optimized
    /// layout (the library's decode-path options), one or two programs, and
    /// the sharded dim (tokens or `I`) splitting evenly over them.
    #[nki_helper]
    pub fn validate_mlp_cte(t: i64, h: i64, i: i64, programs: i64, has_bias: bool, clamped: bool, optimized_layout: bool) {
        assert!(!clamped, "mlp: the gate/up clamp limits are only supported in token generation (B * S <= 96, force_cte_mode off)");
        assert!(
            !optimized_layout,
            "mlp: use_tkg_down_proj_optimized_layout is only supported in token generation (B * S <= 96, force_cte_mode off)"
        );
        assert!(programs <= 2, "mlp: the context-encoding path runs on 1 or 2 programs (LNC1 or LNC2), got {programs}");
        if shard_on_intermediate(t, h, i, programs, has_bias) {
            assert!(i % programs == 0, "mlp: I = {i} must split evenly over the {programs} programs (this call shards I)");
        } else {
            assert!(t % programs == 0, "mlp: B * S = {t} must split evenly over the {programs} programs (this call shards the tokens)");
        }
    }

    /// `STATIC_MX`'s own rules (the library's static-MX branches on trn3):
    /// `H` and `I` in whole 512-row pre-shuffled blocks, and each program's
    /// part of `I` too when the programs split `I`; an even number of token
    /// rows on each program (the MX matmul's moving width). The rules of
    /// [`static_mx_violation`](crate::mlp::mlp_parameters::static_mx_violation),
    /// each with its one message, and trn3 (the launch's, which the call
    /// rules do not see).
    #[nki_helper]
    pub fn validate_static_mx(t: i64, h: i64, i: i64, programs: i64, has_bias: bool) {
        assert!(nisa::get_nc_version() == nisa::nc_version::gen4, "mlp: quantization_type STATIC_MX needs trn3 (nc_matmul_mx)");
        assert!(h % MX_TILE == 0 && i % MX_TILE == 0, crate::mlp::mlp_parameters::STATIC_MX_TILES);
        let on_intermediate = shard_on_intermediate(t, h, i, programs, has_bias);
        assert!(!on_intermediate || (i / programs) % MX_TILE == 0, crate::mlp::mlp_parameters::STATIC_MX_SHARDS);
        let rows = if on_intermediate { t } else { t / programs };
        assert!(rows % 2 == 0, crate::mlp::mlp_parameters::STATIC_MX_ROWS);
    }

    /// Asserts that a quantization scale is given as a float32 `[128, n]` tensor.
    #[nki_helper]
    pub fn check_scale(t: Option<Hbm>, name: &str, quantization_type: QuantizationType, n: i64) {
        assert!(t.is_some(), "mlp: {name} must be given for quantization_type {quantization_type}");
        if let Some(v) = t {
            let shape = v.shape();
            assert!(v.dtype() == nl::float32, "mlp: {name} must be float32, got {}", v.dtype());
            assert!(v.ndim() == 2 && shape[0] == H0 && shape[1] == n, "mlp: {name} must be [128, {n}], got {shape}");
        }
    }

    /// The fp8 quantization's rules (`STATIC` or `ROW`): the three weights
    /// `float8_e4m3` (and only then), 16-bit hidden rows (a float32 operand
    /// cannot multiply an fp8 one), and the scales of the library's shapes.
    #[nki_helper]
    pub fn validate_quantization(quantization_type: QuantizationType, hidden: Hbm, w: MLPTensors, q: MLPQuantizationParameters) {
        let quantized = quantization_type != QuantizationType::NONE;
        let fp8 = nl::float8_e4m3;
        let (gw, uw, dw) = (w.gate_proj_weights_tensor, w.up_proj_weights_tensor, w.down_proj_weights_tensor);
        assert!(
            quantized == (gw.dtype() == fp8) && quantized == (uw.dtype() == fp8) && quantized == (dw.dtype() == fp8),
            "mlp: the gate, up and down weights must be float8_e4m3 exactly when quantization_type is STATIC, ROW or STATIC_MX, got {} with {}, {}, {}",
            quantization_type,
            gw.dtype(),
            uw.dtype(),
            dw.dtype()
        );
        if quantized {
            assert!(
                hidden.dtype() != nl::float32,
                "mlp: hidden_tensor must be bfloat16, float16 or float8_e4m3 with fp8 weights (they multiply it as it is), got float32"
            );
            let row = quantization_type == QuantizationType::ROW;
            let (i, h) = (gw.shape()[1], gw.shape()[0]);
            check_scale(q.gate_w_scale, "gate_w_scale", quantization_type, if row { i } else { 1 });
            check_scale(q.up_w_scale, "up_w_scale", quantization_type, if row { i } else { 1 });
            check_scale(q.down_w_scale, "down_w_scale", quantization_type, if row { h } else { 1 });
            if !row {
                check_scale(q.gate_up_in_scale, "gate_up_in_scale", quantization_type, 1);
                check_scale(q.down_in_scale, "down_in_scale", quantization_type, 1);
            }
        }
    }

    /// Asserts that `v` is `[d0, d1, d2]` (an MX weight, scale or bias).
    #[nki_helper]
    pub fn check_mx_shape(v: Hbm, name: &str, d0: i64, d1: i64, d2: i64) {
        let shape = v.shape();
        assert!(
            v.ndim() == 3 && shape[0] == d0 && shape[1] == d1 && shape[2] == d2,
            "mlp: {name} must be [{d0}, {d1}, {d2}] for quantization_type MX, got {shape}"
        );
    }

    /// Asserts an MX scale: given, `uint8`, `[d0, d1, d2]`.
    #[nki_helper]
    pub fn check_mx_scale(t: Option<Hbm>, name: &str, d0: i64, d1: i64, d2: i64) {
        assert!(t.is_some(), "mlp: {name} must be given for quantization_type MX");
        if let Some(v) = t {
            assert!(v.dtype() == nl::uint8, "mlp: {name} must be uint8 for quantization_type MX, got {}", v.dtype());
            check_mx_shape(v, name, d0, d1, d2);
        }
    }

    /// The MX form's rules (those of [`mx_violation`](crate::mlp::mlp_parameters::mx_violation)
    /// and the tensors' dtypes and shapes), when the kernel is traced.
    #[nki_helper]
    pub fn validate_mlp_tkg_mx(
        hidden: Hbm,
        w: MLPTensors,
        q: MLPQuantizationParameters,
        act: MLPActivationParameters,
        normalization_type: NormType,
        is_tkg: bool,
        column_tiling: bool,
        optimized_layout: bool,
    ) {
        let [t, h] = hidden.shape();
        let (gw, uw, dw) = (w.gate_proj_weights_tensor, w.up_proj_weights_tensor, w.down_proj_weights_tensor);
        assert!(nisa::get_nc_version() == nisa::nc_version::gen4, "mlp: quantization_type MX needs trn3 (nc_matmul_mx)");
        assert!(
            is_tkg,
            "mlp: quantization_type MX is only supported in token generation (B * S <= 96, force_cte_mode off), got B * S = {t}"
        );
        assert!(h % MX_TILE == 0, "mlp: quantization_type MX needs H to be a multiple of 512, got H = {h}");
        assert!(gw.ndim() == 3, "mlp: gate_proj_weights_tensor must be [128, H / 512, I] for quantization_type MX, got {}", gw.shape());
        // I is the gate weights' last dim: the shapes below are checked against it.
        let i = gw.shape()[2];
        assert!(
            i % MX_TILE == 0 || (i < MX_TILE && i % SCALE_GROUP_SIZE == 0),
            "mlp: quantization_type MX needs I to be a multiple of 512, or below 512 and a multiple of 32, got I = {i}"
        );
        assert!(
            normalization_type == NormType::NO_NORM
                || normalization_type == NormType::RMS_NORM
                || normalization_type == NormType::RMS_NORM_SKIP_GAMMA,
            "mlp: quantization_type MX supports NormType.NO_NORM, RMS_NORM and RMS_NORM_SKIP_GAMMA, got {normalization_type}"
        );
        assert!(w.normalization_bias_tensor.is_none(), "mlp: normalization_bias_tensor is only supported with NormType.LAYER_NORM");
        assert!(
            !column_tiling,
            "mlp: quantization_type MX needs use_tkg_gate_up_proj_column_tiling=False and use_tkg_down_proj_column_tiling=False"
        );
        assert!(w.fused_add_tensor.is_none(), "mlp: quantization_type MX takes no fused_add_tensor");
        let clamped: bool = any_clamp(act.clamps);
        assert!(
            !clamped && !act.skip_gate_proj && !optimized_layout,
            "mlp: quantization_type MX takes no gate/up clamp limits, skip_gate_proj or use_tkg_down_proj_optimized_layout"
        );
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        assert!(
            programs <= 2 && (h / MX_TILE) % programs == 0,
            "mlp: quantization_type MX runs on 1 or 2 programs with H / 512 = {} split evenly over them, got {programs}",
            h / MX_TILE
        );
        assert!(
            hidden.dtype() == nl::bfloat16 || hidden.dtype() == nl::float16,
            "mlp: hidden_tensor must be bfloat16 or float16 for quantization_type MX (quantize_mx reads 16-bit data), got {}",
            hidden.dtype()
        );
        let mx = gw.dtype() == nl::float4_e2m1fn_x4 || gw.dtype() == nl::float8_e4m3fn_x4 || gw.dtype() == nl::float8_e5m2_x4;
        assert!(
            mx && uw.dtype() == gw.dtype() && dw.dtype() == gw.dtype(),
            "mlp: the gate, up and down weights must share an MX dtype (float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4) for quantization_type MX, got {}, {}, {}",
            gw.dtype(),
            uw.dtype(),
            dw.dtype()
        );
        let (n_h, n_i) = (h / MX_TILE, i.div_ceil(MX_TILE));
        let i_p = if i < MX_TILE { i / MX_PACK } else { H0 };
        check_mx_shape(gw, "gate_proj_weights_tensor", H0, n_h, i);
        check_mx_shape(uw, "up_proj_weights_tensor", H0, n_h, i);
        check_mx_shape(dw, "down_proj_weights_tensor", i_p, n_i, h);
        check_mx_scale(q.gate_w_scale, "gate_w_scale", GROUPS_PER_MX_TILE, n_h, i);
        check_mx_scale(q.up_w_scale, "up_w_scale", GROUPS_PER_MX_TILE, n_h, i);
        check_mx_scale(q.down_w_scale, "down_w_scale", i_p / MX_GROUP_PARTITIONS, n_i, h);
        let b_p = if i <= MX_TILE { i / MX_PACK } else { H0 };
        let (gate_b, up_b) = (w.gate_proj_bias_tensor, w.up_proj_bias_tensor);
        if let Some(b) = gate_b {
            check_mx_shape(b, "gate_proj_bias_tensor", b_p, n_i, MX_PACK);
        }
        if let Some(b) = up_b {
            check_mx_shape(b, "up_proj_bias_tensor", b_p, n_i, MX_PACK);
        }
        check_row(w.down_proj_bias_tensor, "down_proj_bias_tensor", h);
    }

    /// The rules of a `float8_e4m3` hidden tensor: it is quantized (`STATIC`
    /// or `ROW`), on the context-encoding path, alone (no norm, residual add
    /// or projection bias), and with `ROW` its rows are `H + 4` wide (each
    /// row's fp32 dequantization scale packed in its last four bytes).
    #[nki_helper]
    pub fn validate_quantized_input(quantization_type: QuantizationType, is_tkg: bool, hidden: Hbm, w: MLPTensors, has_norm: bool, h: i64) {
        let quantized_input = hidden.dtype() == nl::float8_e4m3;
        let quantized = quantization_type != QuantizationType::NONE;
        assert!(!quantized_input || quantized, "mlp: a float8_e4m3 hidden_tensor needs quantization_type STATIC or ROW");
        assert!(
            !quantized_input || !is_tkg,
            "mlp: a float8_e4m3 hidden_tensor is only supported in context encoding (B * S > 96 or force_cte_mode)"
        );
        assert!(
            !quantized || is_tkg || quantized_input,
            "mlp: quantization_type STATIC and ROW in context encoding (B * S > 96 or force_cte_mode) need a float8_e4m3 hidden_tensor, got {}",
            hidden.dtype()
        );
        let extras = has_norm
            || w.fused_add_tensor.is_some()
            || w.gate_proj_bias_tensor.is_some()
            || w.up_proj_bias_tensor.is_some()
            || w.down_proj_bias_tensor.is_some();
        assert!(
            !quantized_input || !extras,
            "mlp: a float8_e4m3 hidden_tensor takes no normalization, fused_add_tensor or projection bias"
        );
        let hs = hidden.shape();
        let width = hs[hidden.ndim() - 1];
        assert!(
            !quantized_input || quantization_type != QuantizationType::ROW || width == h + ROW_SCALE_BYTES,
            "mlp: a ROW-quantized float8_e4m3 hidden_tensor must be [B, S, H + 4] (H = {h}, the row's fp32 scale last), got {hs}"
        );
    }

    /// The rules of a dense (not `MX`) call, checked when the kernel is
    /// traced: the weights' and rows' shapes, the options the kernel
    /// implements, and the chosen path's own rules (the library's
    /// `validate_mlp_arguments`).
    #[nki_helper]
    pub fn validate_mlp_arguments(
        hidden: Hbm,
        w: MLPTensors,
        act: MLPActivationParameters,
        q: MLPQuantizationParameters,
        normalization_type: NormType,
        h: i64,
        t: i64,
        programs: i64,
        is_tkg: bool,
        out_opts: MlpOutputOptions,
        tkg: MlpTkgOptions,
    ) {
        let quantization_type = q.quantization_type;
        let (down_tiling, optimized_layout) = (tkg.use_tkg_down_proj_column_tiling, tkg.use_tkg_down_proj_optimized_layout);
        let has_norm = normalization_type != NormType::NO_NORM;
        let hs = hidden.shape();
        let gs = w.gate_proj_weights_tensor.shape();
        assert!(
            w.gate_proj_weights_tensor.ndim() == 2 && gs[0] == h,
            "mlp: gate_proj_weights_tensor must be [H, I] with H = {h}, got {gs}"
        );
        let i = gs[1];
        assert!(t > 0 && i > 0, "mlp: B * S = {t} and I = {i} must be positive");
        let us = w.up_proj_weights_tensor.shape();
        assert!(
            w.up_proj_weights_tensor.ndim() == 2 && us[0] == h && us[1] == i,
            "mlp: up_proj_weights_tensor must be [{h}, {i}], got {us}"
        );
        let ds = w.down_proj_weights_tensor.shape();
        assert!(
            w.down_proj_weights_tensor.ndim() == 2 && ds[0] == i && ds[1] == h,
            "mlp: down_proj_weights_tensor must be [{i}, {h}], got {ds}"
        );
        check_row(w.gate_proj_bias_tensor, "gate_proj_bias_tensor", i);
        check_row(w.up_proj_bias_tensor, "up_proj_bias_tensor", i);
        check_row(w.down_proj_bias_tensor, "down_proj_bias_tensor", h);
        assert!(
            !has_norm || w.normalization_bias_tensor.is_none() || normalization_type == NormType::LAYER_NORM,
            "mlp: normalization_bias_tensor is only supported with NormType.LAYER_NORM"
        );
        assert!(!optimized_layout || !down_tiling, "mlp: use_tkg_down_proj_optimized_layout needs use_tkg_down_proj_column_tiling=False");
        let static_mx = quantization_type == QuantizationType::STATIC_MX;
        assert!(
            quantization_type == QuantizationType::NONE
                || quantization_type == QuantizationType::STATIC
                || quantization_type == QuantizationType::ROW
                || static_mx,
            "mlp: quantization_type must be QuantizationType.NONE, STATIC, ROW, MX or STATIC_MX (the library's mlp takes no ROW_MX), got {quantization_type}"
        );
        assert!(!out_opts.store_output_in_sbuf, STORE_OUTPUT_IN_SBUF);
        if is_tkg {
            validate_mlp_tkg(t, h, programs, down_tiling);
        } else {
            let has_bias = w.gate_proj_bias_tensor.is_some() || w.up_proj_bias_tensor.is_some() || w.down_proj_bias_tensor.is_some();
            let clamped: bool = any_clamp(act.clamps);
            validate_mlp_cte(t, h, i, programs, has_bias, clamped, optimized_layout);
            if static_mx {
                validate_static_mx(t, h, i, programs, has_bias);
            }
        }
        assert!(!static_mx || !is_tkg, crate::mlp::mlp_parameters::STATIC_MX_TOKEN_GENERATION);
        if has_norm {
            assert!(
                normalization_type == NormType::RMS_NORM_SKIP_GAMMA || w.normalization_weights_tensor.is_some(),
                "mlp: normalization_type {normalization_type} needs normalization_weights_tensor"
            );
            check_row(w.normalization_weights_tensor, "normalization_weights_tensor", h);
            check_row(w.normalization_bias_tensor, "normalization_bias_tensor", h);
        }
        let fused_add_tensor = w.fused_add_tensor;
        if let Some(r) = fused_add_tensor {
            assert!(r.shape() == hs, "mlp: fused_add_tensor must have hidden_tensor's shape {hs}, got {}", r.shape());
        }
    }

    /// The MLP of `hidden_tensor` `[B, S, H]` (or `[T, H]`) with gate and up
    /// weights `[H, I]` and down weights `[I, H]`; returns the output `[B, S,
    /// H]`, and the residual sum when `store_fused_add_result` is set.
    #[nki_kernel]
    pub fn mlp(
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] hidden_tensor: Hbm,
        #[spread] tensors: MLPTensors,
        #[default(false)] store_fused_add_result: bool,
        #[default(ActFnType::SiLU)] activation_fn: ActFnType,
        #[default(NormType::NO_NORM)] normalization_type: NormType,
        #[spread(clipping_bound = quant_clipping_bound)] quant: MLPQuantizationParameters,
        #[spread] out_opts: MlpOutputOptions,
        #[default(1e-6)] eps: f64,
        #[default(false)] skip_gate_proj: bool,
        #[spread] tkg: MlpTkgOptions,
        #[spread] clamps: ClampLimits,
        #[default(false)] force_cte_mode: bool,
    ) -> Outputs {
        let rank = hidden_tensor.ndim();
        assert!(rank == 2 || rank == 3, "mlp: hidden_tensor must be [B, S, H] or [T, H], got {rank} dims");
        let hs = hidden_tensor.shape();
        let (b, sl) = if rank == 3 { (hs[0], hs[1]) } else { (1, hs[0]) };
        // ROW-quantized fp8 rows carry their fp32 scale in 4 more bytes: H
        // is the down weights' (as the library reads it), checked against
        // the rows' width with the quantization's rules.
        let packed = quantization_type == QuantizationType::ROW && hidden_tensor.dtype() == nl::float8_e4m3;
        let width = hs[rank - 1];
        let h = if packed && down_proj_weights_tensor.ndim() == 2 { down_proj_weights_tensor.shape()[1] } else { width };
        let t = b * sl;
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        // The rules of `mlp_violation`, checked when the kernel is traced.
        assert!(h > 0 && h % H0 == 0, "mlp: H = {h} must be a positive multiple of 128");
        let w = phase_tensors(tensors, normalization_type);
        let act = MLPActivationParameters { activation_fn, skip_gate_proj, clamps };
        let out_dtype = output_dtype.unwrap_or(hidden_tensor.dtype());
        let is_tkg = t <= TKG_BS_SEQLEN_THRESHOLD && !force_cte_mode;
        if quantization_type == QuantizationType::MX {
            assert!(!out_opts.store_output_in_sbuf, STORE_OUTPUT_IN_SBUF);
            let tiling = use_tkg_gate_up_proj_column_tiling || use_tkg_down_proj_column_tiling;
            validate_mlp_tkg_mx(
                hidden_tensor.reshape([t, h]),
                w,
                quant,
                act,
                normalization_type,
                is_tkg,
                tiling,
                use_tkg_down_proj_optimized_layout,
            );
            let out = nl::ndarray([b, sl, h], out_dtype, buffer = nl::shared_hbm);
            let (hidden, output) = (hidden_tensor.reshape([t, h]), out.reshape([t, h]));
            mlp_tkg_mx(MLPParameters { hidden, w, output, stored: None, normalization_type, eps, act, quant });
            return Outputs(out);
        }
        validate_mlp_arguments(hidden_tensor, w, act, quant, normalization_type, h, t, programs, is_tkg, out_opts, tkg);

        let out = nl::ndarray([b, sl, h], out_dtype, buffer = nl::shared_hbm);
        let store = store_fused_add_result && fused_add_tensor.is_some();
        let stored = nl::ndarray([b, sl, h], out_dtype, buffer = nl::shared_hbm);
        validate_quantization(quantization_type, hidden_tensor, w, quant);
        validate_quantized_input(quantization_type, is_tkg, hidden_tensor, w, normalization_type != NormType::NO_NORM, h);
        let stored_2d = if store { Some(stored.reshape([t, h])) } else { None };
        let (hidden_2d, out_2d) = (hidden_tensor.reshape([t, width]), out.reshape([t, h]));
        let p = MLPParameters { hidden: hidden_2d, w, output: out_2d, stored: stored_2d, normalization_type, eps, act, quant };
        if is_tkg {
            mlp_tkg(p, tkg);
        } else {
            mlp_cte(p);
        }
        if store {
            return Outputs(out, stored);
        }
        Outputs(out)
    }
}
