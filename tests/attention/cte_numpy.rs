//! The emitted `attention_cte` (NKI 2.x Python) run under the NumPy executor of
//! `tests/python/nki_harness` against the emulator, both in fp32 precision, on a
//! representative subset of its features at small sizes (one multi-section case).
//! Every output (and both statistics with `cache_softmax`) must agree within
//! `1e-5 max|emulator| + 1e-6`. Two extra cases run both in hardware precision,
//! where the f16 output may differ by up to two f16 roundings (`2^-9 max|emulator|`;
//! one ulp differences are observed).

use crate::common;

use crate::common::attention::run_numpy_kwargs;
use crate::common::{Arg, assert_close};
use crate::cte::{Case, Cp, cte_inputs, emulator_tensors};
use nki::Dtype;
use nki::Precision;
use nki::attention::cte::CteConfig;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

/// The package holding only `attention_cte`, emitted once per test binary.
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("cte_pkg", &[&nki::attention::cte::attention_cte::attention_cte::INFO]))
}

/// A case of [`Case`] with the configuration `cfg`.
fn case(name: &'static str, bs: usize, bs_kv: usize, sq: usize, sk: usize, d: usize, cfg: CteConfig) -> Case {
    Case::new(name, bs, bs_kv, sq, sk, d).with(|_| cfg)
}

impl Case {
    /// fp32: 1e-5; hardware: up to two roundings of the output dtype.
    fn numpy_rtol(&self, output: usize) -> f64 {
        match (self.precision, output, self.dtype) {
            (Precision::Hardware, 0, Dtype::F16) => 2f64.powi(-9),
            (Precision::Hardware, 0, Dtype::Bf16) => 2f64.powi(-6),
            _ => RTOL,
        }
    }

    /// Runs the emulator (typed API) and the emitted kernel under NumPy on the same
    /// inputs and compares every output.
    fn check_numpy(&self) {
        let given = self.data().tensors;
        let tensors = emulator_tensors(&given);
        let emu = self.launch(&cte_inputs(&tensors));
        let mut emu_outs = vec![emu.out];
        emu_outs.extend(emu.neg_max);
        emu_outs.extend(emu.sum);

        // The emitted kernel: q, k, v positional, every other parameter by keyword.
        let arg = |name: &str| {
            given.iter().find(|g| g.name == name).map_or(Arg::None, |g| Arg::Tensor(g.shape.clone(), g.values.clone(), g.dtype))
        };
        let c = &self.cfg;
        let args = [arg("q"), arg("k"), arg("v")];
        let kwargs = [
            ("scale", Arg::Float(c.scale)),
            ("causal_mask", Arg::Bool(c.causal_mask)),
            ("k_prior", arg("k_prior")),
            ("v_prior", arg("v_prior")),
            ("prior_used_len", arg("prior_used_len")),
            ("sink", arg("sink")),
            ("sliding_window", if c.sliding_window > 0 { Arg::Int(c.sliding_window) } else { Arg::None }),
            ("tp_q", Arg::Bool(c.tp_q)),
            ("tp_k", Arg::Bool(c.tp_k)),
            ("tp_out", Arg::Bool(c.tp_out)),
            ("cache_softmax", Arg::Bool(c.cache_softmax)),
            ("softmax_dtype", Arg::Dtype(c.softmax_dtype)),
            ("mm_out_dtype", Arg::Dtype(c.mm_out_dtype)),
            ("cp_offset", arg("cp_offset")),
            ("global_cp_deg", c.global_cp_deg.map_or(Arg::None, Arg::Int)),
            ("cp_strided_q_slicing", Arg::Bool(c.cp_strided_q_slicing)),
            ("bound_min", arg("bound_min")),
            ("bound_max", arg("bound_max")),
            ("cp_striped_input", Arg::Bool(c.cp_striped_input)),
            ("skip_output_normalization", Arg::Bool(c.skip_output_normalization)),
        ];
        let np = run_numpy_kwargs(package(), "attention_cte", &args, &kwargs, self.lnc, &self.precision.to_string());

        assert_eq!(np.len(), emu_outs.len(), "{}: NumPy returned {} outputs, the emulator {}", self.name, np.len(), emu_outs.len());
        for (i, (got, want)) in np.iter().zip(&emu_outs).enumerate() {
            assert_eq!(got.len(), want.numel(), "{} output {i}: size", self.name);
            let want = want.to_f32_vec();
            // The negated max of a fully masked row is -FLOAT32_MIN on both sides,
            // exactly; the other values are compared with the tolerance.
            let sentinel: Vec<usize> = (0..want.len()).filter(|&j| want[j] == f32::MAX).collect();
            for &j in &sentinel {
                assert_eq!(got[j], f32::MAX, "{} output {i} element {j}: fully masked row's neg_max", self.name);
            }
            let rest: Vec<usize> = (0..want.len()).filter(|&j| want[j] != f32::MAX).collect();
            let got: Vec<f32> = rest.iter().map(|&j| got[j]).collect();
            let want: Vec<f64> = rest.iter().map(|&j| f64::from(want[j])).collect();
            if !want.is_empty() {
                assert_close(&format!("{} output {i} (numpy vs emulator)", self.name), &got, &want, ATOL, self.numpy_rtol(i));
                let (err, scale) = common::errors(&got, &want);
                eprintln!("{} output {i}: max abs err {err:.2e}, max|emu| {scale:.2e}, {} sentinels", self.name, sentinel.len());
            }
        }
    }
}

#[test]
fn the_package_passes_the_signature_check() {
    let (ok, out, err) = common::harness(&["check", &package().display().to_string()]);
    assert!(ok, "{out}{err}");
}

#[test]
fn causal_and_non_causal() {
    let base = CteConfig::new();
    case("causal_640", 1, 1, 640, 640, 64, base.cache_softmax(true)).check_numpy();
    case("noncausal_scale_tp_all", 2, 1, 300, 700, 72, base.causal_mask(false).scale(0.125).layouts(false, true, true)).check_numpy();
    case("causal_bf16_inputs_tp_q", 1, 1, 257, 513, 32, base).dtype(Dtype::Bf16).check_numpy();
}

#[test]
fn sliding_window_static_and_dynamic() {
    case("swa300_static", 1, 1, 768, 768, 64, CteConfig::new().sliding_window(300).cache_softmax(true)).check_numpy();
    case("swa128_dynamic_tpk", 1, 1, 640, 900, 64, CteConfig::new().sliding_window(128).layouts(true, true, false)).check_numpy();
}

#[test]
fn context_parallel_modes() {
    let cp = CteConfig::new().context_parallel(4);
    case("cp_contiguous", 1, 1, 256, 1024, 64, cp.cache_softmax(true)).cp(Cp::Contiguous { deg: 4, rank: 2 }).check_numpy();
    case("cp_strided", 1, 1, 256, 1024, 64, cp.cp_strided_q_slicing(true)).cp(Cp::Strided { deg: 4, rank: 1 }).check_numpy();
    // Striped with cp_offset = -1: row 0 is fully masked (finite values on both sides).
    let striped = cp.cp_striped_input(true).cache_softmax(true).skip_output_normalization(true);
    case("cp_striped_minus1", 2, 1, 256, 640, 64, striped).cp(Cp::Striped { deg: 4, offset: -1 }).check_numpy();
    // All keys in the future (ub < 0): every row fully masked.
    case("cp_contiguous_all_future", 1, 1, 128, 600, 32, cp.cache_softmax(true)).cp(Cp::Offset { deg: 4, offset: -128 }).check_numpy();
}

#[test]
fn context_parallel_with_sliding_window_loads_a_key_window() {
    let cfg = CteConfig::new().context_parallel(8).sliding_window(128);
    case("cp_swa_window", 1, 1, 256, 2048, 64, cfg.cache_softmax(true)).cp(Cp::Contiguous { deg: 8, rank: 5 }).check_numpy();
    case("cp_swa_window_tpk", 2, 1, 256, 2048, 64, cfg.layouts(true, true, false)).cp(Cp::Contiguous { deg: 8, rank: 3 }).check_numpy();
    case("cp_strided_swa", 1, 1, 256, 1024, 64, CteConfig::new().context_parallel(4).cp_strided_q_slicing(true).sliding_window(600))
        .cp(Cp::Strided { deg: 4, rank: 2 })
        .check_numpy();
}

#[test]
fn prefix_caching_sink_and_gqa() {
    case("prefix_swa128", 1, 1, 512, 512, 64, CteConfig::new().sliding_window(128)).prior(700, 350).check_numpy();
    case("prefix_noncausal_sink", 2, 1, 256, 300, 64, CteConfig::new().causal_mask(false).sink(true)).prior(600, 599).check_numpy();
    case("prefix_cp", 1, 1, 256, 1024, 32, CteConfig::new().context_parallel(4).cache_softmax(true))
        .prior(300, 1)
        .cp(Cp::Contiguous { deg: 4, rank: 0 })
        .check_numpy();
    case("sink_cached_skip", 1, 1, 384, 384, 64, CteConfig::new().sink(true).cache_softmax(true).skip_output_normalization(true))
        .check_numpy();
    case("gqa_4_2", 4, 2, 256, 384, 32, CteConfig::new().cache_softmax(true)).check_numpy();
}

#[test]
fn packing_lnc2_and_multi_section() {
    case("packing", 2, 2, 512, 512, 64, CteConfig::new().cache_softmax(true)).packed(4).check_numpy();
    case("packing_partial_group_tp_all", 2, 1, 400, 400, 64, CteConfig::new().layouts(true, true, true)).packed(4).check_numpy();
    case("lnc2_odd_batch_split", 3, 1, 1024, 1024, 32, CteConfig::new().cache_softmax(true)).lnc(2).check_numpy();
    case("lnc2_odd_batch_small", 3, 3, 256, 512, 32, CteConfig::new().causal_mask(false)).lnc(2).check_numpy();
    let ms = CteConfig::new().causal_mask(false).sink(true).cache_softmax(true).layouts(true, false, true);
    case("multi_section_10752", 1, 1, 128, 10752, 32, ms).check_numpy();
}

#[test]
fn hardware_precision_agrees_up_to_output_roundings() {
    let base = CteConfig::new().cache_softmax(true);
    case("hw_f16_tp_all", 1, 1, 640, 640, 64, base.layouts(false, true, true)).dtype(Dtype::F16).hw().check_numpy();
    case("hw_f16_multi_section", 1, 1, 128, 10752, 64, base.causal_mask(false)).dtype(Dtype::F16).hw().check_numpy();
}
