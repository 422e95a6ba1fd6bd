//! The tiled RMSNorm example against float64 RMSNorm in both precision modes and,
//! emitted with its module constants and parameter bundle, under the NumPy executor.

use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::rmsnorm::{EPS, TILE, rmsnorm};

/// RMSNorm of each row of an `[n, d]` matrix in float64.
fn reference(x: &[f64], w: &[f64], d: usize, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
            let r = 1.0 / (ms + eps).sqrt();
            row.iter().zip(w).map(move |(v, g)| v * r * g).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn matches_float64_in_fp32_mode() {
    let (n, d) = (2 * TILE as usize, 96);
    let (x, w) = (uniform(n * d, 41, -2.0, 2.0), uniform(d, 42, 0.5, 1.5));
    let out = rmsnorm::Call::new(&tensor(&[n, d], &x, Dtype::F32), &tensor(&[1, d], &w, Dtype::F32))
        .launch(&Launch::new().precision(Precision::Fp32))
        .unwrap();
    assert_close("rmsnorm fp32", &out.to_f32_vec(), &reference(&x, &w, d, EPS), 1e-5, 1e-5);
}

#[test]
fn hardware_mode_with_bf16_data_stays_within_bf16_rounding() {
    let (n, d) = (TILE as usize, 200);
    let x = as_dtype(&uniform(n * d, 43, -3.0, 3.0), Dtype::Bf16);
    let w = uniform(d, 44, 0.5, 1.5);
    let out = rmsnorm::Call::new(&tensor(&[n, d], &x, Dtype::Bf16), &tensor(&[1, d], &w, Dtype::F32)).launch(&Launch::new()).unwrap();
    // Statistics in fp32, one bf16 rounding of the output (relative 2^-8).
    assert_close("rmsnorm bf16", &out.to_f32_vec(), &reference(&x, &w, d, EPS), 1e-2, 8e-3);
}

#[test]
fn emitted_kernel_with_its_module_constants_matches_the_emulator_under_numpy() {
    let (n, d) = (TILE as usize, 64);
    let (x, w) = (uniform(n * d, 45, -2.0, 2.0), uniform(d, 46, 0.5, 1.5));
    let emu = rmsnorm::Call::new(&tensor(&[n, d], &x, Dtype::F32), &tensor(&[1, d], &w, Dtype::F32)).launch(&Launch::new()).unwrap();
    let args = [Arg::Tensor(vec![n, d], x, Dtype::F32), Arg::Tensor(vec![1, d], w, Dtype::F32)];
    let emu_vals: Vec<f64> = emu.to_f32_vec().iter().map(|&v| f64::from(v)).collect();
    assert_close("rmsnorm numpy vs emulator", &run_numpy("rmsnorm", &args, 1, "fp32")[0], &emu_vals, 1e-6, 1e-6);
    // The constants are Python module constants, referenced by name.
    let pkg = nki::emit::Package::new(&[&rmsnorm::INFO]).unwrap();
    let src = &pkg.files()["rmsnorm.py"];
    for line in [
        "\nTILE = 128\n",
        "\nEPS = 1e-6\n",
        "\nSTATS_DTYPE = nl.float32\n",
        "assert n % TILE == 0",
        "wb = nl.ndarray(shape=(TILE, d), dtype=STATS_DTYPE)",
    ] {
        assert!(src.contains(line), "{line:?} missing from\n{src}");
    }
}

#[test]
fn rejects_rows_not_multiple_of_the_tile() {
    let t = tensor(&[100, 8], &[0.0; 800], Dtype::F32);
    let w = tensor(&[1, 8], &[1.0; 8], Dtype::F32);
    let e = rmsnorm::Call::new(&t, &w).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("multiple of 128"), "{e}");
}
