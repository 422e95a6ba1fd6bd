//! The emitted `attention_tkg.py` (NKI 2.x Python): it passes the signature check
//! against the official NKI tables, keeps the library's leading parameters, and
//! run under the NumPy executor of `tests/python/nki_harness` (fp32, LNC 1 and 2)
//! agrees with the emulator within `1e-5·max|emulator| + 1e-6` — and both agree
//! with the float64 decode reference.

mod common;

use common::attention::{PyArg, run_numpy_kwargs};
use common::tkg::{Data, config, data, reference, shape, tensors};
use common::{assert_close, errors};
use nki::attention::reference_tkg::Shape;
use nki::attention::tkg::attention_tkg::attention_tkg;
use nki::{Dtype, Launch, Precision};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("tkg_pkg", &[&attention_tkg::INFO]))
}

#[test]
fn emitted_package_passes_the_check_and_keeps_the_library_parameters() {
    let (ok, out, err) = common::harness(&["check", &package().display().to_string()]);
    assert!(ok, "signature check failed:\n{out}{err}");
    let src = std::fs::read_to_string(package().join("attention_tkg.py")).expect("the package holds attention_tkg.py");
    // The library's tensor parameters in its order, then `AttnTKGConfig`'s fields
    // this kernel implements (in the dataclass's order), then `sink`.
    let signature = "\n@nki.jit\ndef attention_tkg(q, k_active, v_active, k_prior, v_prior, mask, bs, q_head, s_active, curr_sprior, full_sprior, d_head, tp_k_prior=False, sink=None):";
    assert!(src.contains(signature), "attention_tkg.py keeps the signature:\n{src}");
}

fn np_case(name: &str, s: Shape, tp_k_prior: bool, sink: bool, lnc: usize) {
    let x: Data = data(name, s, sink, true, Dtype::F32);
    let t = tensors(&x, tp_k_prior, Dtype::F32);
    let emulated = config(s, tp_k_prior, sink)
        .launch(&Launch::new().lnc(lnc).precision(Precision::Fp32), &t.inputs())
        .expect("the emulator runs")
        .to_f32_vec();
    let n = s.bs * s.q_head * s.s_active;
    let k_prior_shape = if tp_k_prior { vec![s.cache_bs, 1, s.full_sprior, s.d] } else { vec![s.cache_bs, 1, s.d, s.full_sprior] };
    let args = vec![
        PyArg::Tensor(vec![s.d, n], x.q.clone(), Dtype::F32),
        PyArg::Tensor(vec![s.d, s.bs * s.s_active], x.k_active.clone(), Dtype::F32),
        PyArg::Tensor(vec![s.bs, 1, s.s_active, s.d], x.v_active.clone(), Dtype::F32),
        PyArg::Tensor(k_prior_shape, x.k_prior.clone(), Dtype::F32),
        PyArg::Tensor(vec![s.cache_bs, 1, s.full_sprior, s.d], x.v_prior.clone(), Dtype::F32),
        PyArg::Tensor(vec![s.curr_sprior, s.bs, s.q_head, s.s_active], x.mask.clone(), Dtype::U8),
        PyArg::Int(s.bs as i64),
        PyArg::Int(s.q_head as i64),
        PyArg::Int(s.s_active as i64),
        PyArg::Int(s.curr_sprior as i64),
        PyArg::Int(s.full_sprior as i64),
        PyArg::Int(s.d as i64),
    ];
    let mut kwargs = vec![("tp_k_prior", PyArg::Bool(tp_k_prior))];
    if let Some(sk) = &x.sink {
        kwargs.push(("sink", PyArg::Tensor(vec![s.q_head, 1], sk.clone(), Dtype::F32)));
    }
    let numpy = run_numpy_kwargs(package(), "attention_tkg", &args, &kwargs, lnc, "fp32");
    assert_eq!(numpy.len(), 1, "one output");
    let emulated_f64: Vec<f64> = emulated.iter().map(|&v| f64::from(v)).collect();
    let (err, scale) = errors(&numpy[0], &emulated_f64);
    assert!(err <= ATOL + RTOL * scale, "{name}: NumPy vs emulator max abs error {err:.3e} (max|emulator| {scale:.3e})");
    assert_close(&format!("{name} NumPy vs float64"), &numpy[0], &reference(&x, tp_k_prior), ATOL, RTOL);
}

#[test]
fn numpy_executor_agrees_with_the_emulator() {
    np_case("np small", shape(1, 1, 1, 128, 256, 16), false, false, 1);
    np_case("np gqa sink tp", shape(2, 4, 2, 640, 768, 32), true, true, 2);
    np_case("np spare batch", Shape { cache_bs: 3, ..shape(2, 8, 1, 256, 256, 64) }, false, true, 1);
}
