//! `qkv_cte` with MX quantization (trn3) against the float64 projection of
//! `qkv_cte`'s tests with the MX format read from its description: the
//! weights `float8_e4m3fn` codes times `2^(s - 127)` for the `uint8` scale `s`
//! of their 32 hidden rows (2^0 without scales), the normalised rows quantized
//! per 32 consecutive hidden values to `float8_e4m3fn` with the scale
//! `2^(floor(log2 amax) - 7)`. At the library's MX test configurations that
//! the emulator runs quickly (its `test_qkv_cte_mxfp8_unit`, two programs,
//! bfloat16 input), in both precision modes; the emitted source under NumPy
//! against the emulator; the `qkv` entry's MX dispatch; the MX rules.

use crate::common::{CaseName, FP32_ATOL, assert_close, assert_numpy_equals_emulator, assert_refused_by, package_of, tensor};
use crate::qkv_cte::{ACCEPTED, Config, MxForm, Norm, c, tensor_of, with};
use nki::{Dtype, Launch, Precision};
use nkilib::qkv::qkv::qkv as qkv_entry;
use nkilib::qkv::qkv_cte::{NormType, QKVWeightLayout, QkvCteRule, QkvCteShape, QuantizationType, qkv_cte, qkv_cte_violation};

/// `cfg` with MX quantization: weight scales given or not, the input pre-swizzled or not.
const fn mx(cfg: Config, scales: bool, swizzled: bool) -> Config {
    Config { mx: Some(MxForm { scales, swizzled, fp8_input: None, dequant_rows: 0 }), ..cfg }
}

/// `cfg` with MX quantization of a float8 input (`MX_INTERLEAVED`): block
/// scales given or not, static dequantization scales of `dequant_rows` rows or none.
const fn mx_fp8(cfg: Config, fp8: Dtype, scales: bool, dequant_rows: usize) -> Config {
    Config { mx: Some(MxForm { scales, swizzled: false, fp8_input: Some(fp8), dequant_rows }), ..cfg }
}

/// `cfg` with MX static dequantization of a bfloat16 input (`MX_INTERLEAVED`),
/// the scales given as `rows` rows.
const fn mx_dequant(cfg: Config, rows: usize) -> Config {
    Config { mx: Some(MxForm { scales: false, swizzled: false, fp8_input: None, dequant_rows: rows }), ..cfg }
}

/// The library's MX configurations (`I = (nq + 2·nkv)·128`, two programs,
/// one batch) at H up to 2048: every norm, the residual add, both biases,
/// both layouts, RoPE, short and non-tile-aligned sequences (124, 1000), S
/// blocks of several tiles, eps 77; the pre-swizzled input; and neutral
/// weight scales (no `qkv_w_scale`). Its H = 8192 and 16384 configurations
/// are compared with the library kernel under the NumPy executor.
const MX_CONFIGS: &[Config] = &[
    mx(c(2, 1, 124, 512, 128, 2, 1, Norm::Rms, true), true, false),
    mx(with(c(2, 1, 128, 512, 128, 5, 5, Norm::Rms, true), false, true, false, true), true, false),
    mx(c(2, 1, 128, 512, 128, 3, 1, Norm::Layer, true), true, false),
    mx(c(2, 1, 512, 1024, 128, 2, 1, Norm::RmsSkipGamma, true), true, false),
    mx(c(2, 1, 512, 1024, 128, 2, 1, Norm::None, true), true, false),
    mx(with(c(2, 1, 512, 1024, 128, 5, 5, Norm::Rms, false), false, false, true, true), true, false),
    mx(with(c(2, 1, 512, 1024, 128, 2, 2, Norm::Layer, true), true, true, false, true), true, false),
    mx(c(2, 1, 1000, 512, 128, 2, 1, Norm::Rms, true), true, false),
    Config { eps: 77.0, ..mx(c(2, 1, 512, 2048, 128, 2, 1, Norm::Rms, false), true, false) },
    mx(c(2, 1, 124, 512, 128, 2, 1, Norm::None, false), true, true),
    mx(with(c(2, 1, 1024, 512, 128, 2, 1, Norm::None, false), false, true, false, true), true, true),
    mx(with(c(2, 1, 512, 1024, 128, 2, 1, Norm::None, false), false, false, true, false), true, true),
    mx(c(2, 1, 128, 1024, 128, 8, 4, Norm::None, false), false, false),
    mx(c(1, 2, 130, 512, 128, 1, 1, Norm::Rms, false), false, false),
];

/// The library's `MX_INTERLEAVED` configurations (its
/// `test_qkv_cte_mxfp8_neutral_mx_scales`, `test_qkv_cte_mxfp8_static_dequant`
/// and `test_qkv_cte_mx_bf16_static_dequant`: two programs, one batch,
/// `I = (nq + 2·nkv)·128`) at H up to 2048: the float8 input with neutral and
/// given block scales, both float8 dtypes; static dequantization of float8 and
/// bfloat16 input with one-row and 128-row scales, the bias, RoPE, NBSd, S
/// blocks of several tiles and non-tile-aligned sequences (124, 200); and one
/// program with two batches.
const INTERLEAVED_CONFIGS: &[Config] = &[
    mx_fp8(c(2, 1, 128, 512, 128, 2, 1, Norm::None, false), Dtype::Fp8E4m3Fn, false, 0),
    mx_fp8(c(2, 1, 124, 512, 128, 2, 1, Norm::None, false), Dtype::Fp8E4m3, false, 0),
    mx_fp8(with(c(2, 1, 512, 2048, 128, 2, 1, Norm::None, false), false, true, true, false), Dtype::Fp8E4m3Fn, true, 0),
    mx_fp8(with(c(2, 1, 128, 1024, 128, 5, 1, Norm::None, false), false, true, false, true), Dtype::Fp8E4m3Fn, false, 1),
    mx_fp8(with(c(2, 1, 200, 1024, 128, 2, 1, Norm::None, false), false, false, true, false), Dtype::Fp8E4m3Fn, false, 128),
    mx_dequant(with(c(2, 1, 128, 512, 128, 2, 1, Norm::None, false), false, true, false, false), 1),
    mx_dequant(with(c(2, 1, 128, 1024, 128, 2, 1, Norm::None, false), false, true, true, true), 128),
    mx_dequant(c(2, 1, 1000, 512, 128, 2, 1, Norm::None, false), 1),
    mx_dequant(with(c(1, 2, 130, 1024, 128, 4, 2, Norm::None, false), false, true, false, true), 128),
];

/// Runs `cfg` in `precision` (bfloat16 inputs) against the float64
/// reference, the normalised rows rounded to bfloat16 in hardware precision:
/// within `scaled` of the output's scale.
fn check(cfg: &Config, precision: Precision, scaled: f64) {
    let (v, cache) = cfg.inputs_in(Dtype::Bf16);
    let got = cfg.run(&v, &cache, Dtype::Bf16, precision);
    let want = cfg.projection(&v, &cache, precision == Precision::Hardware);
    assert_close(&format!("{} {precision:?}", cfg.name()), &got, &want, FP32_ATOL, scaled);
}

/// fp32 precision: without a norm or residual add the rows quantized are
/// the reference's (only the fp32 summation differs); a norm's fp32 rows may
/// round to a neighbouring e4m3 code where the float64 rows sit near a
/// midpoint (a few of H values off by 2^-4 relative).
#[test]
fn qkv_cte_mx_in_fp32_match_float64() {
    for cfg in MX_CONFIGS {
        check(cfg, Precision::Fp32, 1.0 / 64.0);
    }
}

/// Hardware precision: the residual sum and the normalised rows in
/// bfloat16 (as the reference rounds them) and the output in bfloat16
/// (RoPE's products too). The kernel rounds the norm's steps (`x·rstd`, then
/// `·gamma`) each to bfloat16, so some rows cross an e4m3 midpoint the
/// reference's once-rounded rows do not: one e4m3 step (2^-4) of the
/// output's scale.
#[test]
fn qkv_cte_mx_in_hardware_precision_match_float64() {
    for cfg in MX_CONFIGS {
        check(cfg, Precision::Hardware, 1.0 / 16.0);
    }
}

/// The `MX_INTERLEAVED` forms in fp32 precision: a float8 input is
/// multiplied as given (only the fp32 summation differs from float64, and
/// nothing is rounded to bfloat16 in this mode); a bfloat16 input's rows
/// divided by the input scale in fp32 may round to a neighbouring e4m3 code
/// where the float64 quotient sits near a midpoint.
#[test]
fn qkv_cte_mx_interleaved_in_fp32_match_float64() {
    for cfg in INTERLEAVED_CONFIGS {
        let fp8 = cfg.mx.is_some_and(|m| m.fp8_input.is_some());
        check(cfg, Precision::Fp32, if fp8 { 1e-5 } else { 1.0 / 64.0 });
    }
}

/// The `MX_INTERLEAVED` forms in hardware precision: the output (and RoPE's
/// products) in bfloat16, a bfloat16 input's quotients stored in bfloat16 as
/// the reference rounds them: a bfloat16 step of the output's scale for the
/// float8 input, one e4m3 step (2^-4) with static quantization.
#[test]
fn qkv_cte_mx_interleaved_in_hardware_precision_match_float64() {
    for cfg in INTERLEAVED_CONFIGS {
        let fp8 = cfg.mx.is_some_and(|m| m.fp8_input.is_some());
        check(cfg, Precision::Hardware, if fp8 { 4.0 / 256.0 } else { 1.0 / 16.0 });
    }
}

/// The emitted `MX_INTERLEAVED` path under NumPy equals the emulator, element
/// for element, in both modes: the float8 input (neutral scales, and static
/// dequantization with RoPE) and the bfloat16 input's static dequantization
/// (two programs with RoPE and NBSd, one program with two batches).
#[test]
fn qkv_cte_mx_interleaved_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("qkv_cte_mx_interleaved_pkg", &[&qkv_cte::INFO]);
    for cfg in [INTERLEAVED_CONFIGS[0], INTERLEAVED_CONFIGS[3], INTERLEAVED_CONFIGS[6], INTERLEAVED_CONFIGS[8]] {
        let (v, cache) = cfg.inputs_in(Dtype::Bf16);
        let call = cfg.numpy_call(&v, &cache, Dtype::Bf16);
        assert_numpy_equals_emulator(&pkg, ("qkv_cte", &cfg.name()), call, cfg.lnc, "trn3", |p| cfg.run(&v, &cache, Dtype::Bf16, p));
    }
}

/// The emitted MX path under NumPy equals the emulator, element for element,
/// in both modes: the row-major and the pre-swizzled input.
#[test]
fn qkv_cte_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("qkv_cte_mx_pkg", &[&qkv_cte::INFO]);
    for cfg in [MX_CONFIGS[6], MX_CONFIGS[10], MX_CONFIGS[13]] {
        let (v, cache) = cfg.inputs_in(Dtype::Bf16);
        let call = cfg.numpy_call(&v, &cache, Dtype::Bf16);
        assert_numpy_equals_emulator(&pkg, ("qkv_cte", &cfg.name()), call, cfg.lnc, "trn3", |p| cfg.run(&v, &cache, Dtype::Bf16, p));
    }
}

/// The `qkv` entry hands context-encoding MX calls to `qkv_cte` (the
/// library's `is_h_dim_4h_transposed` is `qkv_cte`'s `is_input_swizzled`).
#[test]
fn qkv_entry_runs_mx_context_calls_by_qkv_cte() {
    let cfg = MX_CONFIGS[9];
    let (v, cache) = cfg.inputs_in(Dtype::Bf16);
    let (args, kw) = cfg.numpy_call(&v, &cache, Dtype::Bf16);
    let (x, w) = (tensor_of(&args[0]), tensor_of(&args[1]));
    let scales = tensor_of(&kw.iter().find(|(k, _)| *k == "qkv_w_scale").expect("scales given").1);
    for p in [Precision::Fp32, Precision::Hardware] {
        let got = qkv_entry::Call::new(&x, &w)
            .quantization_type(QuantizationType::MX)
            .weight_layout(QKVWeightLayout::MX_CONTIGUOUS)
            .is_h_dim_4h_transposed(true)
            .qkv_w_scale(&scales)
            .d_head(128)
            .num_q_heads(2)
            .num_kv_heads(1)
            .launch(&cfg.launch(p))
            .unwrap_or_else(|e| panic!("qkv: {e}"));
        assert_eq!(got.0[0].to_f32_vec(), cfg.run(&v, &cache, Dtype::Bf16, p), "{p:?}");
    }
}

/// The `qkv` entry hands a float8 context-encoding call (`MX_INTERLEAVED`)
/// to `qkv_cte` and refuses one its decode path would take.
#[test]
fn qkv_entry_runs_float8_mx_context_calls_by_qkv_cte() {
    let cfg = INTERLEAVED_CONFIGS[0];
    let (v, cache) = cfg.inputs_in(Dtype::Bf16);
    let (args, _) = cfg.numpy_call(&v, &cache, Dtype::Bf16);
    let (x, w) = (tensor_of(&args[0]), tensor_of(&args[1]));
    let call = |x| {
        qkv_entry::Call::new(x, &w)
            .quantization_type(QuantizationType::MX)
            .weight_layout(QKVWeightLayout::MX_INTERLEAVED)
            .d_head(128)
            .num_q_heads(2)
            .num_kv_heads(1)
    };
    let p = Precision::Hardware;
    let got = call(&x).launch(&cfg.launch(p)).unwrap_or_else(|e| panic!("qkv: {e}"));
    assert_eq!(got.0[0].to_f32_vec(), cfg.run(&v, &cache, Dtype::Bf16, p));
    let decode = tensor(&[1, 64, 512], &vec![0.0; 64 * 512], Dtype::Fp8E4m3Fn);
    let e = call(&decode).launch(&cfg.launch(p)).unwrap_err().to_string();
    assert!(e.contains("qkv: a float8 input takes the context-encoding path"), "{e}");
}

/// The MX rules, as `const fn` and when the kernel is traced.
#[test]
fn qkv_cte_mx_rules_refuse_by_name() {
    let ok = QkvCteShape {
        bxs: 1000,
        hidden: 1024,
        fused_qkv: 512,
        num_q_heads: 2,
        nbsd: false,
        fused_rope: false,
        mx_quant: true,
        s_shard: 500,
        swizzled: true,
        normalized: false,
        ..ACCEPTED
    };
    assert_eq!(qkv_cte_violation(ok), None);
    // The DMA-transpose forms: bfloat16 rows with the static dequantization scales, float8 rows.
    let dequant = QkvCteShape { swizzled: false, mx_interleaved: true, qkv_w_scale: [128, 3], qkv_in_scale: [1, 1], ..ok };
    assert_eq!(qkv_cte_violation(dequant), None);
    assert_eq!(qkv_cte_violation(QkvCteShape { fp8_input: true, bf16_input: false, qkv_in_scale: [0, 0], ..dequant }), None);
    assert_eq!(qkv_cte_violation(QkvCteShape { fp8_input: true, bf16_input: false, ..dequant }), None);
    let cases = [
        (QkvCteShape { hidden: 640, ..ok }, QkvCteRule::MxHidden),
        (QkvCteShape { s_shard: 501, ..ok }, QkvCteRule::MxSeqShard),
        (QkvCteShape { mx_interleaved: true, ..ok }, QkvCteRule::MxContiguous),
        (QkvCteShape { fp8_input: true, bf16_input: false, ..ok }, QkvCteRule::MxDmaTransposeFusion),
        (QkvCteShape { fp8_input: true, bf16_input: false, swizzled: false, normalized: true, ..ok }, QkvCteRule::MxDmaTransposeFusion),
        (QkvCteShape { fp8_input: true, swizzled: false, fused_residual_add: true, ..ok }, QkvCteRule::MxDmaTransposeFusion),
        (QkvCteShape { fp8_input: true, bf16_input: false, swizzled: false, dma_transpose_off: true, ..ok }, QkvCteRule::MxDmaTransposeOff),
        (QkvCteShape { fp8_input: true, bf16_input: false, swizzled: false, ..ok }, QkvCteRule::MxInterleaved),
        (QkvCteShape { swizzled: false, bf16_input: false, ..dequant }, QkvCteRule::MxStaticDequantInput),
        (QkvCteShape { qkv_w_scale: [1024 / 32, 512], ..dequant }, QkvCteRule::MxStaticDequantScales),
        (QkvCteShape { qkv_in_scale: [1, 3], ..dequant }, QkvCteRule::MxStaticDequantScales),
        (QkvCteShape { qkv_in_scale: [64, 1], ..dequant }, QkvCteRule::MxStaticDequantScales),
        (QkvCteShape { num_q_heads: 0, ..dequant }, QkvCteRule::MxStaticDequantHeads),
        (QkvCteShape { mx_interleaved: false, ..dequant }, QkvCteRule::MxInterleaved),
        (QkvCteShape { kv_cache: true, ..ok }, QkvCteRule::MxKvCache),
        (QkvCteShape { mx_quant: false, ..ok }, QkvCteRule::SwizzledNeedsMx),
        (QkvCteShape { normalized: true, ..ok }, QkvCteRule::SwizzledFusion),
        (QkvCteShape { fused_residual_add: true, ..ok }, QkvCteRule::SwizzledFusion),
    ];
    assert_refused_by(qkv_cte_violation, cases);
    assert_eq!(nkilib::qkv_cte_config!(bxs = 256, hidden = 1024, fused_qkv = 512, mx_quant = true, s_shard = 128).hidden, 1024);

    let cfg = MX_CONFIGS[13];
    let (v, cache) = cfg.inputs_in(Dtype::Bf16);
    let (args, _) = cfg.numpy_call(&v, &cache, Dtype::Bf16);
    let [x, w] = [&args[0], &args[1]].map(tensor_of);
    let call = || qkv_cte::Call::new(&x, &w).quantization_type(QuantizationType::MX).weight_layout(QKVWeightLayout::MX_CONTIGUOUS);
    let trn3 = cfg.launch(Precision::Fp32);
    let err = |call: qkv_cte::Call, launch: &Launch| call.launch(launch).unwrap_err().to_string();
    let e = err(call(), &Launch::new());
    assert!(e.contains("quantization_type MX needs trn3"), "{e}");
    let e = err(call().weight_layout(QKVWeightLayout::MX_INTERLEAVED), &trn3);
    assert!(e.contains("MX quantization without float8 input or qkv_in_scale needs weight_layout MX_CONTIGUOUS"), "{e}");
    let e = err(call().fused_norm_type(NormType::RMS_NORM_SKIP_GAMMA).is_input_swizzled(true), &trn3);
    assert!(e.contains("is_input_swizzled supports neither a norm nor fused_residual_add"), "{e}");
    let w_bf16 = tensor(&[128, 384], &vec![0.0; 128 * 384], Dtype::Bf16);
    let e =
        err(qkv_cte::Call::new(&x, &w_bf16).quantization_type(QuantizationType::MX).weight_layout(QKVWeightLayout::MX_CONTIGUOUS), &trn3);
    assert!(e.contains("fused_qkv_weights must be float8_e4m3fn_x4 exactly when quantization_type is MX"), "{e}");
    let (in_scale, w_scale) = (tensor(&[1, 1], &[1.0], Dtype::F32), tensor(&[1, 3], &[1.0; 3], Dtype::F32));
    let heads = || call().d_head(128).num_q_heads(1).num_kv_heads(1).qkv_in_scale(&in_scale).qkv_w_scale(&w_scale);
    let dequant = || heads().weight_layout(QKVWeightLayout::MX_INTERLEAVED);
    let e = err(heads(), &trn3);
    assert!(e.contains("float8 input and qkv_in_scale with MX quantization need weight_layout MX_INTERLEAVED"), "{e}");
    let e = err(dequant().load_input_with_DMA_transpose(false), &trn3);
    assert!(e.contains("need load_input_with_DMA_transpose=True"), "{e}");
    let e = err(dequant().fused_norm_type(NormType::RMS_NORM_SKIP_GAMMA), &trn3);
    assert!(e.contains("take neither a norm, fused_residual_add nor is_input_swizzled"), "{e}");
    let e = err(dequant().qkv_w_scale(&in_scale), &trn3);
    assert!(e.contains("needs qkv_w_scale float32 [1, 3] or [128, 3], got float32 (1, 1)"), "{e}");
    let e = err(dequant().qkv_in_scale(&w_scale), &trn3);
    assert!(e.contains("qkv_in_scale with MX quantization must be [1, 1] or [128, 1], got (1, 3)"), "{e}");
    let x16 = tensor(&[1, 130, 512], &vec![0.0; 130 * 512], Dtype::F16);
    let e = err(
        qkv_cte::Call::new(&x16, &w)
            .quantization_type(QuantizationType::MX)
            .weight_layout(QKVWeightLayout::MX_INTERLEAVED)
            .qkv_in_scale(&in_scale)
            .qkv_w_scale(&w_scale),
        &trn3,
    );
    assert!(e.contains("qkv_in_scale with MX quantization takes a bfloat16 or float8 input, got float16"), "{e}");
    let x8 = tensor(&[1, 130, 128], &vec![0.0; 130 * 128], Dtype::Fp8E4m3Fn);
    let e = err(qkv_cte::Call::new(&x8, &w), &trn3);
    assert!(e.contains("a float8 input needs quantization_type MX"), "{e}");
    let odd = tensor(&[1, 130, 512], &vec![0.0; 130 * 512], Dtype::Bf16);
    let e = err(
        qkv_cte::Call::new(&odd, &w).quantization_type(QuantizationType::MX).weight_layout(QKVWeightLayout::MX_CONTIGUOUS),
        &cfg.launch(Precision::Fp32).lnc(2),
    );
    assert!(e.contains("S / programs = 65 must be even for MX quantization"), "{e}");
    let bad_scale = tensor(&[8, 384], &vec![127.0; 8 * 384], Dtype::U8);
    let e = err(call().qkv_w_scale(&bad_scale), &trn3);
    assert!(e.contains("qkv_w_scale must be uint8 [H / 32, I] = [16, 384] for MX quantization"), "{e}");
}
