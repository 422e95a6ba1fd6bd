//! The library's `cascaded_max` against each row's maximum and the first
//! column holding it (the documented "maximum values" and "global indices of
//! maximum values", `argmax`'s first occurrence for ties), computed directly
//! in float64, over the library's own test configurations and its sweep's
//! bfloat16 corners, in both precision modes; exact indices above 256 in
//! bfloat16; its emitted source under NumPy against the emulator; its rules.

use crate::common::sweep::sweep;
use crate::common::{Arg, as_dtype, run_numpy, seed_of, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nkilib::max::cascaded_max::{CascadedMaxRule, cascaded_max, cascaded_max_violation};

/// The configurations of the library's `test_cascaded_max.py` (LNC, batch,
/// seqlen, vocab; float32 there), and the bfloat16 corners of its sweep.
const LIBRARY_CONFIGS: &[(usize, usize, usize, usize, Dtype)] = &[
    (1, 8, 5, 4058, Dtype::F32),
    (2, 8, 5, 4058, Dtype::F32),
    (1, 4, 5, 4058, Dtype::F32),
    (2, 5, 5, 4058, Dtype::F32),
    (1, 4, 5, 8192, Dtype::F32),
    (1, 8, 5, 8192, Dtype::F32),
    (2, 8, 5, 8192, Dtype::F32),
    (2, 5, 5, 8192, Dtype::F32),
    (1, 1, 1, 3168, Dtype::F32),
    (2, 1, 1, 3168, Dtype::F32),
    (2, 1, 1, 256, Dtype::F32),
    (2, 1, 1, 16000, Dtype::F32),
    (2, 3, 1, 3168, Dtype::F32),
    (2, 7, 1, 3168, Dtype::F32),
    (2, 8, 1, 3168, Dtype::F32),
    (2, 10, 1, 3168, Dtype::F32),
    (2, 16, 1, 3168, Dtype::F32),
    (2, 32, 1, 3168, Dtype::F32),
    (2, 63, 1, 3168, Dtype::F32),
    (2, 65, 1, 3168, Dtype::F32),
    (2, 99, 1, 3168, Dtype::F32),
    (2, 128, 1, 3168, Dtype::F32),
    (2, 256, 1, 3168, Dtype::F32),
    (1, 1, 7, 3999, Dtype::F32),
    (1, 1, 63, 3999, Dtype::F32),
    (2, 1, 127, 3999, Dtype::F32),
    (1, 1, 127, 3999, Dtype::F32),
    (2, 32, 1, 16384, Dtype::Bf16),
    (1, 128, 1, 8192, Dtype::Bf16),
    (2, 128, 1, 256, Dtype::Bf16),
];

/// Each row's maximum and the first column holding it, in float64.
fn reference(x: &[f64], v: usize) -> (Vec<f64>, Vec<f64>) {
    x.chunks(v)
        .map(|row| {
            let (mut best, mut at) = (row[0], 0);
            for (j, &val) in row.iter().enumerate() {
                if val > best {
                    (best, at) = (val, j);
                }
            }
            (best, at as f64)
        })
        .unzip()
}

/// The emulator's `(max_values, max_indices)` for `x` `[b, s, v]` in `dtype`.
fn run(x: &[f64], shape: [usize; 3], dtype: Dtype, lnc: usize, precision: Precision) -> nki::Result<(Vec<f32>, Vec<f32>)> {
    let [b, s, _] = shape;
    let (vals, idx) = cascaded_max::Call::new(&tensor(&shape, x, dtype)).launch(&Launch::new().lnc(lnc).precision(precision))?;
    assert_eq!((vals.shape(), idx.shape(), vals.dtype(), idx.dtype()), (&[b, s, 1][..], &[b, s, 1][..], dtype, Dtype::U32));
    Ok((vals.to_f32_vec(), idx.to_f32_vec()))
}

/// Asserts the values and indices equal the reference exactly.
fn assert_exact(what: &str, x: &[f64], v: usize, got: &(Vec<f32>, Vec<f32>)) {
    let (want_v, want_i) = reference(x, v);
    assert_eq!(got.0.len(), want_v.len(), "{what}");
    for (r, (((&gv, &wv), &gi), &wi)) in got.0.iter().zip(&want_v).zip(&got.1).zip(&want_i).enumerate() {
        assert!(f64::from(gv) == wv && f64::from(gi) == wi, "{what}: row {r}: ({gv}, {gi}) vs ({wv}, {wi})");
    }
}

/// Unit-variance inputs in `dtype` (bfloat16 rows hold ties of the maximum).
fn inputs(name: &str, n: usize, dtype: Dtype) -> Vec<f64> {
    let r = 3f64.sqrt();
    as_dtype(&uniform(n, seed_of(name), -r, r), dtype)
}

/// Every library configuration in hardware precision and in fp32 precision:
/// values and indices exact.
#[test]
fn library_configs_are_exact_in_both_modes() {
    for &(lnc, b, s, v, dtype) in LIBRARY_CONFIGS {
        let name = format!("lnc{lnc}_b{b}_s{s}_v{v}_{dtype:?}");
        let x = inputs(&name, b * s * v, dtype);
        for precision in [Precision::Hardware, Precision::Fp32] {
            let got = run(&x, [b, s, v], dtype, lnc, precision).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_exact(&format!("{name} {precision:?}"), &x, v, &got);
        }
    }
}

/// Edge rows: the maximum at the last column (in the padded last stage) and at
/// column 0; ties everywhere (first column); values all below the library's
/// padding `-9948`; bfloat16 maxima at columns far above 256, which the
/// library's bfloat16 index tiles would round.
#[test]
fn edge_rows_and_exact_bfloat16_indices() {
    let (v, rows) = (3999, 6);
    let mut x = inputs("edges", rows * v, Dtype::Bf16);
    x[v - 1] = 10.0;
    x[v] = 10.0;
    x[2 * v..3 * v].fill(0.5);
    for (j, val) in x[3 * v..4 * v].iter_mut().enumerate() {
        *val = -20000.0 - j as f64;
    }
    x[4 * v + 3001] = 9.0;
    x[5 * v + 257] = 9.0;
    x[5 * v + 3777] = 9.0;
    for (dtype, lnc) in [(Dtype::Bf16, 1), (Dtype::Bf16, 2), (Dtype::F32, 2)] {
        let xs = as_dtype(&x, dtype);
        let got = run(&xs, [2, 3, v], dtype, lnc, Precision::Hardware).unwrap();
        assert_exact(&format!("edges {dtype:?} lnc{lnc}"), &xs, v, &got);
        assert_eq!(got.1, [3998.0, 0.0, 0.0, 0.0, 3001.0, 257.0], "{dtype:?} lnc{lnc}");
    }
}

/// The emitted kernel under NumPy equals the emulator: `V` a multiple of the
/// stages and not, one program and two, both dtypes and modes, a 2-D input.
#[test]
fn emitted_kernel_under_numpy_equals_emulator() {
    for ((lnc, b, s, v), m) in sweep([(1, 4, 5, 4058), (2, 5, 5, 8192), (2, 1, 1, 3168)]) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let name = format!("numpy lnc{lnc}_b{b}_s{s}_v{v}_{dtype:?}");
        let x = inputs(&name, b * s * v, dtype);
        let emu = run(&x, [b, s, v], dtype, lnc, precision).unwrap();
        let np = run_numpy("cascaded_max", &[Arg::Tensor(vec![b, s, v], x.clone(), dtype)], lnc, mode);
        assert!(np.len() == 2 && np[0] == emu.0 && np[1] == emu.1, "{name}: NumPy and the emulator differ");
        let flat = run_numpy("cascaded_max", &[Arg::Tensor(vec![b * s, v], x, dtype)], lnc, mode);
        assert!(flat[0] == emu.0 && flat[1] == emu.1, "{name} as [BxS, V]: NumPy and the emulator differ");
    }
}

/// The rules, as `const fn` and when the kernel is traced, naming the parameter.
#[test]
fn rules_refuse_by_name() {
    assert_eq!(cascaded_max_violation(256, 3168, 2), None);
    assert_eq!(cascaded_max_violation(1, 16384, 2), None);
    assert_eq!(cascaded_max_violation(0, 3168, 1), Some(CascadedMaxRule::Rows));
    assert_eq!(cascaded_max_violation(256, 3168, 1), Some(CascadedMaxRule::RowsPerProgram));
    assert_eq!(cascaded_max_violation(4, 127, 1), Some(CascadedMaxRule::Vocab));
    assert_eq!(cascaded_max_violation(128, 40000, 1), Some(CascadedMaxRule::StageFree));
    assert_eq!(nkilib::cascaded_max_config!(bxs = 40, vocab = 8192, programs = 2), (40, 8192));

    let launch = Launch::new();
    let e = run(&vec![0.0; 129 * 256], [129, 1, 256], Dtype::F32, 1, Precision::Fp32).unwrap_err();
    assert!(e.to_string().contains("input_tensor: 129 rows per program (B * S = 129 over 1) exceed 128"), "{e}");
    let e = run(&[0.0; 100], [1, 1, 100], Dtype::F32, 1, Precision::Fp32).unwrap_err();
    assert!(e.to_string().contains("input_tensor: V = 100 must be at least 128"), "{e}");
    let flat = tensor(&[256], &[0.0; 256], Dtype::F32);
    let e = cascaded_max::Call::new(&flat).launch(&launch).unwrap_err();
    assert!(e.to_string().contains("input_tensor must be [B, S, V] or [BxS, V], got 1 dims"), "{e}");
    let half = tensor(&[1, 256], &[0.0; 256], Dtype::F16);
    let e = cascaded_max::Call::new(&half).launch(&launch).unwrap_err();
    assert_eq!(e.message, "invalid input_tensor = float16: cascaded_max takes input_tensor as float32 or bfloat16");
}
