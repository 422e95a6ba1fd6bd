//! The masked-softmax example written with `nl` tile functions, against float64
//! in both precision models and under the NumPy executor.

use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::masked_softmax::masked_softmax;

/// Row softmax of `x * scale` with the elements where `mask` is 0 at -30000 (`x`,
/// `mask` `[n, d]`), in float64.
fn reference(x: &[f64], mask: &[f64], scale: f64, d: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (row, keep) in x.chunks(d).zip(mask.chunks(d)) {
        let s: Vec<f64> = row.iter().zip(keep).map(|(&v, &k)| if k != 0.0 { v * scale } else { -30000.0 }).collect();
        let max = s.iter().copied().fold(f64::MIN, f64::max);
        let z: f64 = s.iter().map(|v| (v - max).exp()).sum();
        out.extend(s.iter().map(|v| (v - max).exp() / z));
    }
    out
}

/// Scores in [-3, 3) and a mask hiding ~30% of the elements, all of row 5.
fn inputs(n: usize, d: usize, dtype: Dtype) -> (Vec<f64>, Vec<f64>) {
    let x = as_dtype(&uniform(n * d, 81, -3.0, 3.0), dtype);
    let mask = uniform(n * d, 82, 0.0, 1.0).iter().enumerate().map(|(i, &u)| if i / d == 5 || u < 0.3 { 0.0 } else { 1.0 }).collect();
    (x, mask)
}

fn run(n: usize, d: usize, x: &[f64], mask: &[f64], dtype: Dtype, launch: Launch) -> Vec<f32> {
    masked_softmax::Call::new(&tensor(&[n, d], x, dtype), &tensor(&[n, d], mask, Dtype::U8))
        .scale(0.5)
        .launch(&launch)
        .unwrap()
        .to_f32_vec()
}

#[test]
fn matches_float64_in_both_precisions() {
    let (n, d) = (256, 96);
    let (x, mask) = inputs(n, d, Dtype::F32);
    let want = reference(&x, &mask, 0.5, d);
    assert_close("masked_softmax fp32", &run(n, d, &x, &mask, Dtype::F32, Launch::new().precision(Precision::Fp32)), &want, 1e-7, 1e-6);
    let hidden_row = &want[5 * d..6 * d];
    assert!(hidden_row.iter().all(|&v| (v - 1.0 / d as f64).abs() < 1e-12), "a fully hidden row is uniform");
    // bfloat16 scores: float32 arithmetic, one rounding into the bfloat16 output.
    let (x, mask) = inputs(n, d, Dtype::Bf16);
    let want = reference(&x, &mask, 0.5, d);
    let got = run(n, d, &x, &mask, Dtype::Bf16, Launch::new());
    assert!(got.iter().all(|&v| v == nki::dtype::round_f32(Dtype::Bf16, v)), "the output is bfloat16");
    assert_close("masked_softmax bf16", &got, &want, 1e-6, 2f64.powi(-8));
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let (n, d) = (128, 64);
    let (x, mask) = inputs(n, d, Dtype::F32);
    let emu: Vec<f64> = run(n, d, &x, &mask, Dtype::F32, Launch::new().precision(Precision::Fp32)).into_iter().map(f64::from).collect();
    let args = [Arg::Tensor(vec![n, d], x, Dtype::F32), Arg::Tensor(vec![n, d], mask, Dtype::U8), Arg::Float(0.5)];
    assert_close("masked_softmax numpy vs emulator", &run_numpy("masked_softmax", &args, 1, "fp32")[0], &emu, 1e-7, 1e-6);
}

#[test]
fn rejects_a_mask_of_another_shape() {
    let x = tensor(&[128, 8], &[0.0; 1024], Dtype::F32);
    let mask = tensor(&[128, 4], &[1.0; 512], Dtype::U8);
    let e = masked_softmax::Call::new(&x, &mask).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("mask must be [128, 8]"), "{e}");
}

#[test]
fn profiles_as_the_instructions_the_tile_functions_lower_to() {
    use nki::profile::{Target, Unit};
    let (n, d) = (256, 64);
    let (x, mask) = inputs(n, d, Dtype::Bf16);
    let launch = Launch::new().profile(Target::Trn2);
    let got = run(n, d, &x, &mask, Dtype::Bf16, launch.clone());
    assert_eq!(got, run(n, d, &x, &mask, Dtype::Bf16, Launch::new()), "profiling changes no result");
    let profile = launch.profiled().unwrap();
    let ops: Vec<(&str, Unit)> = profile.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect();
    let count = |op: &str| ops.iter().filter(|&&(o, _)| o == op).count();
    // Per block: the where's masked copy, the softmax's exp, max and sum.
    assert_eq!(count("nisa.tensor_copy_predicated"), 2);
    assert_eq!(count("nisa.activation"), 2);
    assert_eq!(count("nisa.tensor_reduce"), 4);
    assert_eq!(count("nisa.dma_copy"), 6, "two loads and a store per block");
}
