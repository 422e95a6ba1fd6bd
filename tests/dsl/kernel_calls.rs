//! A kernel calling another kernel whose `Option` parameter precedes required
//! ones (as the library's `router_topk(x, w, w_bias, router_logits, ...)`): the
//! emulation binds positional arguments as the emitted Python does, every
//! parameter without a default in order, `None` passed for the `Option`, so both
//! artifacts compute the same thing.

use crate::common::{self, Arg};

use nki::prelude::*;

/// `(x + 2·y + bias + extra) · scale` over `[128, 8]`; `bias` and `extra` count
/// as zero when absent. `x` and `y` weigh differently, so a binding that swaps
/// them shows.
#[nki_kernel]
pub fn weighted_sum(x: Hbm, bias: Option<Hbm>, y: Hbm, extra: Option<Hbm>, #[default(1.0)] scale: f64) -> Hbm {
    let out = nl::ndarray([128, 8], x.dtype(), buffer = nl::shared_hbm);
    let acc = nl::ndarray([128, 8], nl::float32, buffer = nl::sbuf);
    let t = nl::ndarray([128, 8], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(acc, x);
    nisa::dma_copy(t, y);
    nisa::tensor_scalar(t, t, nl::multiply, 2.0);
    nisa::tensor_tensor(acc, acc, t, nl::add);
    if let Some(b) = bias {
        nisa::dma_copy(t, b);
        nisa::tensor_tensor(acc, acc, t, nl::add);
    }
    if let Some(e) = extra {
        nisa::dma_copy(t, e);
        nisa::tensor_tensor(acc, acc, t, nl::add);
    }
    nisa::tensor_scalar(acc, acc, nl::multiply, scale);
    nisa::dma_copy(out, acc);
    out
}

/// `weighted_sum` called positionally, its `Option` before `y` passed as `None`
/// (or as `b` when `with_bias`), its trailing ones by keyword.
#[nki_kernel]
pub fn calls_weighted_sum(a: Hbm, b: Hbm, c: Hbm, with_bias: bool) -> Hbm {
    let out: Hbm = if with_bias { weighted_sum(a, b, c, scale = 3.0) } else { weighted_sum(a, None, c, extra = b, scale = 0.5) };
    out
}

#[test]
fn a_kernel_call_binds_as_the_emitted_python() {
    let n: i32 = 128 * 8;
    let a: Vec<f64> = (0..n).map(|i| f64::from(i % 7) - 3.0).collect();
    let b: Vec<f64> = (0..n).map(|i| f64::from(i % 5) * 0.25).collect();
    let c: Vec<f64> = (0..n).map(|i| f64::from(i % 11) - 5.0).collect();
    let pkg = common::package_of("kernel_calls_pkg", &[&calls_weighted_sum::INFO]);
    let (ta, tb, tc) =
        (common::tensor(&[128, 8], &a, Dtype::F32), common::tensor(&[128, 8], &b, Dtype::F32), common::tensor(&[128, 8], &c, Dtype::F32));
    for with_bias in [true, false] {
        // With the bias: (a + 2c + b)·3; without: (a + 2c + b)·0.5, `b` as `extra`.
        let scale = if with_bias { 3.0 } else { 0.5 };
        let want: Vec<f64> = (0..a.len()).map(|i| (a[i] + 2.0 * c[i] + b[i]) * scale).collect();
        let got = calls_weighted_sum::Call::new(&ta, &tb, &tc, with_bias).launch(&Launch::new()).unwrap().to_f32_vec();
        common::assert_close(&format!("emulator, bias {with_bias}"), &got, &want, 1e-6, 1e-6);
        let tensor = |v: &[f64]| Arg::Tensor(vec![128, 8], v.to_vec(), Dtype::F32);
        let args = vec![vec![tensor(&a), tensor(&b), tensor(&c), Arg::Bool(with_bias)]];
        let np = common::run_numpy_ranks(&pkg, "calls_weighted_sum", &args, 1, "fp32").swap_remove(0);
        common::assert_close(&format!("numpy, bias {with_bias}"), &np[0], &want, 1e-6, 1e-6);
        assert_eq!(np[0], got, "emulator and executor, bias {with_bias}");
    }
    assert!(calls_weighted_sum::NKI_SOURCE.contains("weighted_sum(a, None, c, extra=b, scale=0.5)"), "{}", calls_weighted_sum::NKI_SOURCE);
}
