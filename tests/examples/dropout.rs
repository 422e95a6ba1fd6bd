//! The training-mode dropout example against a float64 reference whose mask comes
//! from the reference XORWOW (Marsaglia 2003, seeded as documented), in both
//! precision modes; its keep rate; and the emitted kernel under the NumPy
//! executor, bitwise.

use crate::common::xorwow::{draws, seeded_lanes, uniform01};
use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision, Tensor};
use nki_examples::dropout::dropout;

/// Whether each element of an `[n, d]` tensor survives: 128-row tiles in order,
/// row `p` of a tile drawing from Vector lane `p` seeded with `seed`.
fn keep_mask(seed: u32, n: usize, d: usize, rate: f64) -> Vec<bool> {
    let mut lanes = seeded_lanes(seed, 128, 4);
    let threshold = f64::from(rate as f32);
    (0..n / 128).flat_map(|_| draws(&mut lanes, d)).map(|b| uniform01(b) >= threshold).collect()
}

/// `x / (1 - rate)` where kept, 0 elsewhere.
fn reference(x: &[f64], keep: &[bool], rate: f64) -> Vec<f64> {
    x.iter().zip(keep).map(|(&v, &k)| if k { v / (1.0 - rate) } else { 0.0 }).collect()
}

fn seed_tensor(seed: u32) -> Tensor {
    Tensor::from_i64(&[1, 1], &[i64::from(seed)], Dtype::U32).unwrap()
}

#[test]
fn matches_float64_with_the_reference_mask_in_fp32_mode() {
    let (n, d, rate, seed) = (384, 200, 0.3, 2024);
    let x = uniform(n * d, 71, -2.0, 2.0);
    let out = dropout::Call::new(&tensor(&[n, d], &x, Dtype::F32), &seed_tensor(seed), rate)
        .launch(&Launch::new().precision(Precision::Fp32))
        .unwrap();
    let keep = keep_mask(seed, n, d, rate);
    assert_close("dropout fp32", &out.to_f32_vec(), &reference(&as_dtype(&x, Dtype::F32), &keep, rate), 1e-6, 1e-6);
    // 76800 elements: the keep rate's standard deviation is sqrt(0.21 / n) ~ 0.0017.
    let kept = out.to_f32_vec().iter().filter(|&&v| v != 0.0).count() as f64 / (n * d) as f64;
    assert!((kept - 0.7).abs() < 5.0 * (0.21 / (n * d) as f64).sqrt(), "keep rate {kept}");
}

#[test]
fn hardware_mode_rounds_the_rescaled_bf16_survivors_once() {
    let (n, d, rate, seed) = (128, 96, 0.5, 7);
    let x = as_dtype(&uniform(n * d, 72, -3.0, 3.0), Dtype::Bf16);
    let out = dropout::Call::new(&tensor(&[n, d], &x, Dtype::Bf16), &seed_tensor(seed), rate).launch(&Launch::new()).unwrap();
    // rate 0.5 scales by 2: exact in bf16.
    assert_close("dropout bf16", &out.to_f32_vec(), &reference(&x, &keep_mask(seed, n, d, rate), rate), 0.0, 0.0);
}

#[test]
fn another_seed_gives_another_mask_and_the_same_seed_the_same() {
    let (n, d) = (128, 64);
    let x = tensor(&[n, d], &vec![1.0; n * d], Dtype::F32);
    let run = |seed| dropout::Call::new(&x, &seed_tensor(seed), 0.5).launch(&Launch::new()).unwrap().to_f32_vec();
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator_bitwise() {
    let (n, d, rate, seed) = (256, 72, 0.25, 99);
    let x = uniform(n * d, 73, -1.0, 1.0);
    let out = dropout::Call::new(&tensor(&[n, d], &x, Dtype::F32), &seed_tensor(seed), rate).launch(&Launch::new()).unwrap();
    let args = [Arg::Tensor(vec![n, d], x, Dtype::F32), Arg::Tensor(vec![1, 1], vec![f64::from(seed)], Dtype::U32), Arg::Float(rate)];
    let np = run_numpy("dropout", &args, 1, "hardware");
    let want: Vec<f64> = out.to_f32_vec().iter().map(|&v| f64::from(v)).collect();
    assert_close("numpy dropout", &np[0], &want, 0.0, 0.0);
}
