//! `nl::shared_constant`: a nested literal becomes a float32 shared-HBM tensor,
//! in the emulator and under the NumPy executor.

use crate::common;

use crate::common::{Arg, assert_close, tensor};
use nki::prelude::*;

/// `out = x * c` for a `[2, 3]` `x`, with `c` a literal (ints stored as float32).
#[nki_kernel]
pub fn scale_by_constant(x: Hbm) -> Hbm {
    let c = nl::shared_constant([[0.1, -2, 3.5], [1e-3, 4, -0.25]]);
    let a = nl::ndarray([2, 3], nl::float32);
    let b = nl::ndarray([2, 3], nl::float32);
    nisa::dma_copy(a, x);
    nisa::dma_copy(b, c);
    nisa::tensor_tensor(a, a, b, nl::multiply);
    let out = nl::ndarray([2, 3], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, a);
    out
}

#[test]
fn a_constant_literal_scales_like_its_float32_values() {
    let c = [0.1, -2.0, 3.5, 1e-3, 4.0, -0.25];
    let x: Vec<f64> = (0..6).map(|i| i as f64 - 2.5).collect();
    // The reference: each constant rounded to float32, the product in float64.
    let want: Vec<f64> = x.iter().zip(c).map(|(&x, c)| x * f64::from(c as f32)).collect();
    let out = scale_by_constant::Call::new(&tensor(&[2, 3], &x, Dtype::F32)).launch(&Launch::new()).unwrap();
    assert_close("emulated", &out.to_f32_vec(), &want, 0.0, 1e-6);
    let pkg = common::package_of("shared_constant_pkg", &[&scale_by_constant::INFO]);
    let args = vec![vec![Arg::Tensor(vec![2, 3], x.clone(), Dtype::F32)]];
    let np = common::run_numpy_ranks(&pkg, "scale_by_constant", &args, 1, "fp32").swap_remove(0);
    assert_close("numpy", &np[0], &want, 0.0, 1e-6);
    assert!(
        scale_by_constant::NKI_SOURCE.contains("nl.shared_constant(constant=[[0.1, -2.0, 3.5], [0.001, 4.0, -0.25]])"),
        "{}",
        scale_by_constant::NKI_SOURCE
    );
}
