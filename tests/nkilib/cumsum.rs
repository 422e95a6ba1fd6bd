//! The library's `cumsum` (`tensor_tensor_scan` with a carried column) against
//! float64 prefix sums, over the documented shapes in both precision modes, and
//! its emitted source under NumPy against the emulator.

use crate::common;

use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nkilib::cumsum::cumsum::cumsum;

/// Inclusive prefix sums along the last dimension of length `h`, in float64.
fn reference(x: &[f64], h: usize) -> Vec<f64> {
    x.chunks(h)
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

/// The library's column tile: a carry is rounded to the output dtype once per tile boundary.
const F_TILE: usize = 2048;

fn run(shape: &[usize], x: &[f64], dtype: Dtype, precision: Precision) -> Vec<f32> {
    let out = cumsum::Call::new(&tensor(shape, x, dtype)).launch(&Launch::new().precision(precision)).unwrap();
    assert_eq!((out.shape(), out.dtype()), (shape, dtype));
    out.to_f32_vec()
}

#[test]
fn fp32_matches_float64_prefix_sums_from_the_smallest_to_the_largest_documented_shape() {
    // Smallest; partial row block and column tile; typical; 3-D with S = 10; the
    // documented maximum B = 2048, H = 8192 (four column tiles).
    for shape in [&[1, 1][..], &[130, 2100], &[256, 1024], &[7, 10, 300], &[2048, 8192]] {
        let (n, h) = (shape.iter().product::<usize>(), shape[shape.len() - 1]);
        let x = uniform(n, common::seed_of(&format!("{shape:?}")), -1.0, 1.0);
        // fp32 sums of up to 8192 terms of magnitude <= 1: within a few fp32 steps of H.
        assert_close(
            &format!("cumsum fp32 {shape:?}"),
            &run(shape, &x, Dtype::F32, Precision::Fp32),
            &reference(&x, h),
            1e-6 * h as f64,
            0.0,
        );
    }
}

#[test]
fn hardware_mode_rounds_each_sum_once_plus_once_per_carried_tile() {
    for shape in [&[128, 256][..], &[3, 10, 4100]] {
        let h = shape[shape.len() - 1];
        let n = shape.iter().product::<usize>();
        let x = as_dtype(&uniform(n, 62, 0.0, 1.0), Dtype::Bf16);
        let want = reference(&x, h);
        // Non-negative terms: each output is the fp32 running sum rounded once to
        // bf16 (2^-8 relative), and every carried boundary adds one more bf16
        // rounding of the carry, at most 2^-8 of the final row sum each.
        let boundaries = h.div_ceil(F_TILE) - 1;
        let got = run(shape, &x, Dtype::Bf16, Precision::Hardware);
        for (row, (g, w)) in got.chunks(h).zip(want.chunks(h)).enumerate() {
            let total = w[h - 1];
            for (j, (&g, &w)) in g.iter().zip(w).enumerate() {
                let bound = w / 256.0 + boundaries as f64 * total / 256.0;
                assert!((f64::from(g) - w).abs() <= bound, "{shape:?} row {row} col {j}: {g} vs {w} (bound {bound})");
            }
        }
    }
}

#[test]
fn axis_must_be_the_last_dimension() {
    let x = tensor(&[2, 128], &uniform(256, 3, 0.0, 1.0), Dtype::F32);
    let launch = Launch::new();
    for axis in [-1, 1] {
        cumsum::Call::new(&x).axis(axis).launch(&launch).unwrap();
    }
    let e = cumsum::Call::new(&x).axis(0).launch(&launch).unwrap_err();
    assert!(e.message.contains("axis must be -1 or the last dim 1, got axis = 0"), "{e}");
    // The same rule at compile time for constant arguments.
    assert_eq!(nkilib::cumsum_config!(axis = -1, rank = 3), (-1, 3));
    assert!(nkilib::cumsum::cumsum::axis_is_last(2, 3) && !nkilib::cumsum::cumsum::axis_is_last(0, 3));
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let shape = [3usize, 5, 2100];
    let x = uniform(shape.iter().product(), 63, -1.0, 1.0);
    let emu: Vec<f64> = run(&shape, &x, Dtype::F32, Precision::Fp32).into_iter().map(f64::from).collect();
    let np = run_numpy("cumsum", &[Arg::Tensor(shape.to_vec(), x, Dtype::F32)], 1, "fp32");
    assert_close("cumsum numpy vs emulator", &np[0], &emu, 1e-5, 1e-6);
}
