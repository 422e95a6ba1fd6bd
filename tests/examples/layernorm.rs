//! The LayerNorm example (`bn_stats` / `bn_aggr`) against float64 LayerNorm, in
//! both precision modes, on rows wider than one `bn_stats` chunk.

use crate::common::{as_dtype, assert_close, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::layernorm::layernorm;

/// LayerNorm of each row of an `[n, d]` matrix in float64 (population variance).
fn reference(x: &[f64], gamma: &[f64], beta: &[f64], d: usize, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
            let rstd = 1.0 / (var + eps).sqrt();
            row.iter().zip(gamma).zip(beta).map(move |((v, g), b)| (v - mean) * rstd * g + b).collect::<Vec<_>>()
        })
        .collect()
}

fn inputs(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    // An offset mean and unequal scales per row exercise the variance merge of bn_aggr.
    let x: Vec<f64> = uniform(n * d, seed, -2.0, 2.0).iter().enumerate().map(|(i, v)| 3.0 + v * (1.0 + (i / d % 5) as f64)).collect();
    (x, uniform(d, seed + 1, 0.5, 1.5), uniform(d, seed + 2, -0.5, 0.5))
}

#[test]
fn matches_float64_in_fp32_mode_across_bn_stats_chunks() {
    // 1100 columns: chunks of 512, 512 and 76.
    let (n, d, eps) = (256, 1100, 1e-5);
    let (x, g, b) = inputs(n, d, 21);
    let out = layernorm::Call::new(&tensor(&[n, d], &x, Dtype::F32), &tensor(&[1, d], &g, Dtype::F32), &tensor(&[1, d], &b, Dtype::F32))
        .launch(&Launch::new().precision(Precision::Fp32))
        .unwrap();
    assert_close("layernorm fp32", &out.to_f32_vec(), &reference(&x, &g, &b, d, eps), 2e-5, 2e-5);
}

#[test]
fn hardware_mode_with_bf16_data_stays_within_bf16_rounding() {
    let (n, d, eps) = (128, 300, 1e-3);
    let (x, g, b) = inputs(n, d, 31);
    let x = as_dtype(&x, Dtype::Bf16);
    let out = layernorm::Call::new(&tensor(&[n, d], &x, Dtype::Bf16), &tensor(&[1, d], &g, Dtype::F32), &tensor(&[1, d], &b, Dtype::F32))
        .eps(eps)
        .launch(&Launch::new())
        .unwrap();
    // Statistics in fp32, one bf16 rounding of the output (relative 2^-8).
    assert_close("layernorm bf16", &out.to_f32_vec(), &reference(&x, &g, &b, d, eps), 1e-2, 8e-3);
}

#[test]
fn rejects_rows_not_multiple_of_128() {
    let t = tensor(&[100, 8], &[0.0; 800], Dtype::F32);
    let v = tensor(&[1, 8], &[1.0; 8], Dtype::F32);
    let e = layernorm::Call::new(&t, &v, &v).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("multiple of 128"), "{e}");
}
