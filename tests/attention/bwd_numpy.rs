//! The emitted `attention_bwd.py` (NKI 2.x Python): it passes the signature
//! check against the official NKI tables, keeps the library's signature, and run
//! under the NumPy executor of `tests/python/nki_harness` (fp32, LNC 1 and 2,
//! trn2 and trn3) agrees with the emulator within `1e-4·max|emulator| + 1e-6` on
//! dQ, dK, dV and dsinks — and both agree with the float64 reference.

use crate::bwd::{Case, Data, outputs};
use crate::common;
use crate::common::attention::run_numpy_kwargs_ranks;
use crate::common::{Arg, assert_close, spec_run};
use nki::attention::bwd::attention_bwd::attention_bwd;
use nki::hw::Generation;
use nki::{Dtype, Launch, Precision, Tensor};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-6;

/// The package emitted for `attention_bwd` alone (it pulls in what it imports).
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("attention_bwd_pkg", &[&attention_bwd::INFO]))
}

#[test]
fn emitted_package_passes_the_check_with_the_library_signature() {
    let (ok, out, err) = common::harness(&["check", &package().display().to_string()]);
    assert!(ok, "signature check failed:\n{out}{err}");
    let src = std::fs::read_to_string(package().join("attention_bwd.py")).expect("the package holds attention_bwd.py");
    let signature = "\n@nki.jit\ndef attention_bwd(q_ref, k_ref, v_ref, o_ref, dy_ref, lse_ref, sinks_ref=None, bound_min=None, \
                     bound_max=None, use_causal_mask=False, mixed_precision=False, softmax_scale=None, sliding_window=None):\n";
    assert!(src.contains(signature), "attention_bwd.py keeps the library's signature:\n{src}");
    assert!(src.contains("\nfrom .ring_attention_bwd import bwd_tile\n"), "the per-block math is the ring backward's");
}

fn arg(t: &Tensor) -> Arg {
    Arg::Tensor(t.shape().to_vec(), t.to_f32_vec().into_iter().map(f64::from).collect(), t.dtype())
}

fn opt(t: Option<&Tensor>) -> Arg {
    t.map_or(Arg::None, arg)
}

/// The NumPy run of `x` under `case`'s flags: positional tensors, keyword flags.
fn numpy(case: &Case, x: &Data, lnc: usize, generation: Generation) -> Vec<Vec<f32>> {
    let args = [&x.q, &x.k, &x.v, &x.o, &x.dy, &x.lse].map(arg).to_vec();
    let kwargs = vec![
        ("sinks_ref", opt(x.sinks.as_ref())),
        ("bound_min", opt(x.bounds.as_ref().map(|b| &b.0))),
        ("bound_max", opt(x.bounds.as_ref().map(|b| &b.1))),
        ("use_causal_mask", Arg::Bool(case.causal)),
        ("mixed_precision", Arg::Bool(true)),
        ("softmax_scale", Arg::None),
        ("sliding_window", if case.window > 0 { Arg::Int(case.window as i64) } else { Arg::None }),
    ];
    if generation == Generation::Trn2 {
        return run_numpy_kwargs_ranks(package(), "attention_bwd", &[(args, kwargs)], lnc, "fp32").swap_remove(0);
    }
    let run = spec_run(package(), "attention_bwd", &[(args, kwargs)], lnc, "fp32", &generation.to_string());
    assert!(run.ok, "NumPy run failed:\n{}\n{}", run.stdout, run.stderr);
    let outs = run.outputs("attention_bwd", 1).swap_remove(0);
    let _ = std::fs::remove_dir_all(&run.dir);
    outs.into_iter().map(|o| o.into_iter().map(|v| v as f32).collect()).collect()
}

fn check(name: &str, case: &Case, lnc: usize, generation: Generation) {
    let x = case.data(name, Dtype::F32);
    let launch = Launch::new().lnc(lnc).precision(Precision::Fp32).generation(generation);
    let emu = outputs(&case.config().launch(&launch, &x.inputs()).unwrap_or_else(|e| panic!("{name}: {e}")));
    let np = numpy(case, &x, lnc, generation);
    assert_eq!(np.len(), emu.len(), "{name}: NumPy returned {} outputs, the emulator {}", np.len(), emu.len());
    for (((what, n), e), want) in ["dq", "dk", "dv", "dsinks"].into_iter().zip(&np).zip(&emu).zip(&x.want) {
        let e64: Vec<f64> = e.iter().map(|&v| f64::from(v)).collect();
        assert_close(&format!("{name} {what} (numpy vs emulator)"), n, &e64, ATOL, RTOL);
        assert_close(&format!("{name} {what} (numpy vs float64 reference)"), n, want, ATOL, RTOL);
    }
}

fn case(batch: usize, heads: usize, kv_heads: usize, seqlen: usize, causal: bool) -> Case {
    Case { batch, heads, kv_heads, seqlen, head_dim: 64, causal, window: 0, num_sinks: 0, seqlens: Vec::new() }
}

#[test]
fn numpy_gqa_causal_two_sinks_lnc2() {
    check("np gqa causal sinks", &Case { num_sinks: 2, ..case(2, 4, 2, 640, true) }, 2, Generation::Trn2);
}

#[test]
fn numpy_full_one_sink_lnc1_trn3() {
    check("np full sink trn3", &Case { num_sinks: 1, head_dim: 96, ..case(1, 2, 1, 512, false) }, 1, Generation::Trn3);
}

#[test]
fn numpy_packed_causal_window() {
    let packed = Case { window: 64, seqlens: vec![100, 284, 128], ..case(1, 2, 2, 512, true) };
    check("np packed window", &packed, 2, Generation::Trn2);
}
