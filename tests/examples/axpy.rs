//! The `nl.load` / `nl.full` / `nl.store` example against float64, and the tile
//! functions' static and run-time checks.

use crate::common::{as_dtype, assert_close, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::axpy::axpy;

#[test]
fn matches_float64_in_both_precisions() {
    let (n, m, alpha) = (256, 96, -1.75);
    let x = as_dtype(&uniform(n * m, 71, -2.0, 2.0), Dtype::F32);
    let y = as_dtype(&uniform(n * m, 72, -2.0, 2.0), Dtype::Bf16);
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| alpha * a + b).collect();
    let run = |dtype, launch: Launch| {
        axpy::Call::new(&tensor(&[n, m], &as_dtype(&x, dtype), dtype), &tensor(&[n, m], &y, Dtype::Bf16), alpha)
            .launch(&launch)
            .unwrap()
            .to_f32_vec()
    };
    assert_close("axpy fp32", &run(Dtype::F32, Launch::new().precision(Precision::Fp32)), &want, 1e-6, 1e-6);
    // bf16 x and output: one rounding of the inputs, one of the fp32 result.
    let want_bf16: Vec<f64> = as_dtype(&x, Dtype::Bf16).iter().zip(&y).map(|(a, b)| alpha * a + b).collect();
    assert_close("axpy bf16", &run(Dtype::Bf16, Launch::new()), &as_dtype(&want_bf16, Dtype::Bf16), 0.0, 0.0);
}
