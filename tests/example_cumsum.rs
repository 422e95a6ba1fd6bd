//! The row cumsum example (`tensor_tensor_scan`) against float64 prefix sums.

mod common;

use common::{as_dtype, assert_close, tensor, uniform};
use nki::examples::cumsum::cumsum;
use nki::{Dtype, Launch, Precision};

fn reference(x: &[f64], m: usize) -> Vec<f64> {
    x.chunks(m)
        .flat_map(|row| {
            row.iter()
                .scan(0.0, |acc, v| {
                    *acc += v;
                    Some(*acc)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn matches_float64_prefix_sums_in_fp32_mode() {
    let (n, m) = (256, 300);
    let x = uniform(n * m, 61, -1.0, 1.0);
    let out = cumsum::Call::new(&tensor(&[n, m], &x, Dtype::F32)).launch(&Launch::new().precision(Precision::Fp32)).unwrap();
    assert_close("cumsum fp32", &out.to_f32_vec(), &reference(&x, m), 1e-4, 1e-5);
}

#[test]
fn hardware_mode_rounds_each_sum_once_to_bf16() {
    let (n, m) = (128, 256);
    let x = as_dtype(&uniform(n * m, 62, 0.0, 1.0), Dtype::Bf16);
    let out = cumsum::Call::new(&tensor(&[n, m], &x, Dtype::Bf16)).launch(&Launch::new()).unwrap();
    // fp32 running sums of bf16 values, each rounded once to bf16: within one bf16 step
    // (2^-8 relative) of the rounded float64 sum; a bf16 running sum would drift further.
    assert_close("cumsum bf16", &out.to_f32_vec(), &as_dtype(&reference(&x, m), Dtype::Bf16), 0.0, 1.0 / 256.0);
}
