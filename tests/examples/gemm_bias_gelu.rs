//! The GEMM + bias + GELU example written with `nl` tile functions, against
//! float64 in both precision models and under the NumPy executor.

use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::gemm_bias_gelu::gemm_bias_gelu;

/// `gelu_apprx_tanh(x @ w + bias)` in float64 (`x` `[m, k]`, `w` `[k, n]`, `bias` `[n]`).
fn reference(x: &[f64], w: &[f64], bias: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    (0..m * n)
        .map(|i| {
            let h = (0..k).map(|j| x[i / n * k + j] * w[j * n + i % n]).sum::<f64>() + bias[i % n];
            0.5 * h * (1.0 + (c * (h + 0.044715 * h * h * h)).tanh())
        })
        .collect()
}

fn inputs(m: usize, k: usize, n: usize, dtype: Dtype) -> [Vec<f64>; 3] {
    let scale = 1.0 / (k as f64).sqrt();
    [
        as_dtype(&uniform(m * k, 31, -1.0, 1.0), dtype),
        as_dtype(&uniform(k * n, 32, -scale, scale), dtype),
        as_dtype(&uniform(n, 33, -0.5, 0.5), dtype),
    ]
}

fn run(m: usize, k: usize, n: usize, ins: &[Vec<f64>; 3], dtype: Dtype, launch: Launch) -> Vec<f32> {
    let [x, w, b] = ins;
    gemm_bias_gelu::Call::new(&tensor(&[m, k], x, dtype), &tensor(&[k, n], w, dtype), &tensor(&[1, n], b, dtype))
        .launch(&launch)
        .unwrap()
        .to_f32_vec()
}

#[test]
fn matches_float64_in_both_precisions() {
    let (m, k, n) = (256, 384, 192);
    let ins = inputs(m, k, n, Dtype::F32);
    let want = reference(&ins[0], &ins[1], &ins[2], m, k, n);
    assert_close("gemm_bias_gelu fp32", &run(m, k, n, &ins, Dtype::F32, Launch::new().precision(Precision::Fp32)), &want, 1e-5, 1e-5);
    // bfloat16 inputs: exact products, float32 sums and GELU, one rounding into the bfloat16 output.
    let ins = inputs(m, k, n, Dtype::Bf16);
    let want = reference(&ins[0], &ins[1], &ins[2], m, k, n);
    let got = run(m, k, n, &ins, Dtype::Bf16, Launch::new());
    assert!(got.iter().all(|&v| v == nki::dtype::round_f32(Dtype::Bf16, v)), "the output is bfloat16");
    assert_close("gemm_bias_gelu bf16", &got, &want, 1e-3, 2f64.powi(-8));
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let (m, k, n) = (128, 256, 96);
    let ins = inputs(m, k, n, Dtype::F32);
    let emu: Vec<f64> = run(m, k, n, &ins, Dtype::F32, Launch::new().precision(Precision::Fp32)).into_iter().map(f64::from).collect();
    let [x, w, b] = ins;
    let args = [Arg::Tensor(vec![m, k], x, Dtype::F32), Arg::Tensor(vec![k, n], w, Dtype::F32), Arg::Tensor(vec![1, n], b, Dtype::F32)];
    assert_close("gemm_bias_gelu numpy vs emulator", &run_numpy("gemm_bias_gelu", &args, 1, "fp32")[0], &emu, 1e-6, 1e-5);
}

#[test]
fn rejects_a_contraction_that_is_not_a_multiple_of_128() {
    let x = tensor(&[128, 100], &[0.0; 12800], Dtype::F32);
    let w = tensor(&[100, 8], &[0.0; 800], Dtype::F32);
    let b = tensor(&[1, 8], &[0.0; 8], Dtype::F32);
    let e = gemm_bias_gelu::Call::new(&x, &w, &b).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("multiples of 128"), "{e}");
}

#[test]
fn profiles_as_the_instructions_the_tile_functions_lower_to() {
    use nki::profile::{Target, Unit};
    let (m, k, n) = (128, 256, 64);
    let ins = inputs(m, k, n, Dtype::Bf16);
    let launch = Launch::new().profile(Target::Trn2);
    let got = run(m, k, n, &ins, Dtype::Bf16, launch.clone());
    assert_eq!(got, run(m, k, n, &ins, Dtype::Bf16, Launch::new()), "profiling changes no result");
    let profile = launch.profiled().unwrap();
    let ops: Vec<(&str, Unit)> = profile.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect();
    let count = |op: &str, unit: Unit| ops.iter().filter(|&&o| o == (op, unit)).count();
    // Per contraction slice: a PE transpose of x, its copy back to SBUF, the matmul and the accumulation.
    assert_eq!(count("nisa.nc_transpose", Unit::Tensor), 2);
    assert_eq!(count("nisa.nc_matmul", Unit::Tensor), 3, "two products and the bias broadcast");
    assert_eq!(count("nisa.tensor_tensor", Unit::Vector), 3, "two accumulations and the bias");
    assert_eq!(count("nisa.activation", Unit::Scalar), 1);
}
