//! The example kernels, verified three ways: the emulator against a float64
//! reference, the emitted NKI (run under NumPy) against the emulator, and (in
//! `tests/emit/snapshots.rs`) the emitted text against its checked-in snapshot.

use crate::common;

use crate::common::{Arg, FP32_ATOL, FP32_RTOL, as_dtype, assert_close, matmul_t, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::{
    logsumexp::logsumexp, matmul::matmul, matmul_k_outer::matmul_k_outer, softmax::softmax, tensor_add::tensor_add, transpose::transpose,
};

fn fp32() -> Launch {
    Launch::new().precision(Precision::Fp32)
}

mod add {
    use super::*;

    fn reference(a: &[f64], b: &[f64]) -> Vec<f64> {
        a.iter().zip(b).map(|(x, y)| x + y).collect()
    }

    #[test]
    fn matches_float64_in_fp32_mode_on_one_and_two_programs() {
        let (n, m) = (384, 200);
        let (a, b) = (uniform(n * m, 1, -2.0, 2.0), uniform(n * m, 2, -2.0, 2.0));
        let (ta, tb) = (tensor(&[n, m], &a, Dtype::F32), tensor(&[n, m], &b, Dtype::F32));
        for lnc in [1, 2] {
            let out = tensor_add::Call::new(&ta, &tb).launch(&fp32().lnc(lnc)).unwrap();
            assert_close(&format!("tensor_add lnc{lnc}"), &out.to_f32_vec(), &reference(&a, &b), FP32_ATOL, FP32_RTOL);
        }
    }

    #[test]
    fn hardware_mode_rounds_bf16_sums() {
        let (n, m) = (128, 64);
        let (a, b) = (as_dtype(&uniform(n * m, 3, -1.0, 1.0), Dtype::Bf16), as_dtype(&uniform(n * m, 4, -1.0, 1.0), Dtype::Bf16));
        let out =
            tensor_add::Call::new(&tensor(&[n, m], &a, Dtype::Bf16), &tensor(&[n, m], &b, Dtype::Bf16)).launch(&Launch::new()).unwrap();
        // Each sum is computed in fp32 and rounded once to bf16.
        let want = as_dtype(&reference(&a, &b), Dtype::Bf16);
        assert_close("tensor_add bf16", &out.to_f32_vec(), &want, 0.0, 0.0);
    }

    #[test]
    fn emitted_kernel_under_numpy_matches_the_emulator() {
        let (n, m) = (256, 96);
        let (a, b) = (uniform(n * m, 5, -3.0, 3.0), uniform(n * m, 6, -3.0, 3.0));
        let emu = tensor_add::Call::new(&tensor(&[n, m], &a, Dtype::F32), &tensor(&[n, m], &b, Dtype::F32)).launch(&fp32().lnc(2)).unwrap();
        let args = [Arg::Tensor(vec![n, m], a, Dtype::F32), Arg::Tensor(vec![n, m], b, Dtype::F32)];
        let emu_vals: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
        assert_close("tensor_add numpy vs emulator", &run_numpy("tensor_add", &args, 2, "fp32")[0], &emu_vals, FP32_ATOL, FP32_RTOL);
    }

    #[test]
    fn rejects_rows_not_multiple_of_128() {
        let t = tensor(&[100, 8], &[0.0; 800], Dtype::F32);
        let e = tensor_add::Call::new(&t, &t).launch(&Launch::new()).unwrap_err();
        assert_eq!(e.kind, nki::ErrorKind::Assertion);
        assert!(e.message.contains("multiple of 128, got 100"), "{e}");
        assert!(e.location.as_ref().is_some_and(|(f, _)| f.ends_with("tensor_add.rs")), "{e}");
    }
}

mod row_softmax {
    use super::*;

    fn reference(x: &[f64], m: usize) -> Vec<f64> {
        x.chunks(m)
            .flat_map(|row| {
                let mx = row.iter().cloned().fold(f64::MIN, f64::max);
                let s: f64 = row.iter().map(|v| (v - mx).exp()).sum();
                row.iter().map(move |v| (v - mx).exp() / s).collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn matches_float64_in_fp32_mode() {
        let (n, m) = (256, 333);
        let x = uniform(n * m, 7, -6.0, 6.0);
        let out = softmax::Call::new(&tensor(&[n, m], &x, Dtype::F32)).launch(&fp32()).unwrap();
        assert_close("softmax", &out.to_f32_vec(), &reference(&x, m), FP32_ATOL, FP32_RTOL);
    }

    #[test]
    fn hardware_mode_with_bf16_output_stays_within_bf16_precision() {
        let (n, m) = (128, 512);
        let x = as_dtype(&uniform(n * m, 8, -4.0, 4.0), Dtype::Bf16);
        let out = softmax::Call::new(&tensor(&[n, m], &x, Dtype::Bf16)).launch(&Launch::new()).unwrap();
        // fp32 statistics, one bf16 rounding of each probability: relative error below 2^-8.
        let want = reference(&x, m);
        for (g, w) in out.to_f32_vec().iter().zip(&want) {
            assert!((f64::from(*g) - w).abs() <= w.abs() / 256.0 + 1e-9, "got {g}, want {w}");
        }
    }

    #[test]
    fn emitted_kernel_under_numpy_matches_the_emulator() {
        let (n, m) = (128, 130);
        let x = uniform(n * m, 9, -5.0, 5.0);
        let emu = softmax::Call::new(&tensor(&[n, m], &x, Dtype::F32)).launch(&fp32()).unwrap();
        let emu_vals: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
        let np = run_numpy("softmax", &[Arg::Tensor(vec![n, m], x, Dtype::F32)], 1, "fp32");
        assert_close("softmax numpy vs emulator", &np[0], &emu_vals, FP32_ATOL, FP32_RTOL);
    }
}

mod tiled_matmul {
    use super::*;

    #[test]
    fn accumulates_over_k_in_psum() {
        let (k, m, n) = (384, 256, 1024);
        let (a, b) = (uniform(k * m, 10, -1.0, 1.0), uniform(k * n, 11, -1.0, 1.0));
        let out = matmul::Call::new(&tensor(&[k, m], &a, Dtype::F32), &tensor(&[k, n], &b, Dtype::F32)).launch(&fp32()).unwrap();
        assert_eq!(out.shape(), &[m, n]);
        assert_close("matmul", &out.to_f32_vec(), &matmul_t(&a, &b, k, m, n), FP32_ATOL, FP32_RTOL);
    }

    #[test]
    fn bf16_operands_accumulate_in_fp32() {
        let (k, m, n) = (256, 128, 512);
        let a = as_dtype(&uniform(k * m, 12, -1.0, 1.0), Dtype::Bf16);
        let b = as_dtype(&uniform(k * n, 13, -1.0, 1.0), Dtype::Bf16);
        let out = matmul::Call::new(&tensor(&[k, m], &a, Dtype::Bf16), &tensor(&[k, n], &b, Dtype::Bf16)).launch(&Launch::new()).unwrap();
        // Products of bf16 values are exact in fp32; only fp32 summation error remains.
        assert_close("matmul bf16", &out.to_f32_vec(), &matmul_t(&a, &b, k, m, n), FP32_ATOL, FP32_RTOL);
    }

    #[test]
    fn emitted_kernel_under_numpy_matches_the_emulator() {
        let (k, m, n) = (256, 128, 512);
        let (a, b) = (uniform(k * m, 14, -1.0, 1.0), uniform(k * n, 15, -1.0, 1.0));
        let emu = matmul::Call::new(&tensor(&[k, m], &a, Dtype::F32), &tensor(&[k, n], &b, Dtype::F32)).launch(&fp32()).unwrap();
        let emu_vals: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
        let args = [Arg::Tensor(vec![k, m], a, Dtype::F32), Arg::Tensor(vec![k, n], b, Dtype::F32)];
        assert_close("matmul numpy vs emulator", &run_numpy("matmul", &args, 1, "fp32")[0], &emu_vals, FP32_ATOL, FP32_RTOL);
    }
}

/// The K loop outermost, with one PSUM accumulator per output tile held in a list.
mod k_outer_matmul {
    use super::*;

    #[test]
    fn list_of_psum_accumulators_matches_float64_in_both_executors() {
        for (k, m, n) in [(384, 256, 1536), (128, 128, 4096)] {
            let (a, b) = (uniform(k * m, 40, -1.0, 1.0), uniform(k * n, 41, -1.0, 1.0));
            let want = matmul_t(&a, &b, k, m, n);
            let (ta, tb) = (tensor(&[k, m], &a, Dtype::F32), tensor(&[k, n], &b, Dtype::F32));
            let out = matmul_k_outer::Call::new(&ta, &tb).launch(&fp32()).unwrap();
            assert_close(&format!("matmul_k_outer {k}x{m}x{n}"), &out.to_f32_vec(), &want, FP32_ATOL, FP32_RTOL);
            let args = [Arg::Tensor(vec![k, m], a, Dtype::F32), Arg::Tensor(vec![k, n], b, Dtype::F32)];
            assert_close(&format!("numpy {k}x{m}x{n}"), &run_numpy("matmul_k_outer", &args, 1, "fp32")[0], &want, FP32_ATOL, FP32_RTOL);
        }
    }

    #[test]
    fn emits_the_accumulators_as_a_list_comprehension() {
        let src = matmul_k_outer::NKI_SOURCE;
        let list = "acc = [nl.ndarray(shape=(TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum) for _ in range(n // TILE_N)]";
        assert!(src.contains(list), "{src}");
        assert!(src.contains("block = RowBlock(row=mi * TILE_M, acc=acc)"), "{src}");
    }

    #[test]
    fn more_column_tiles_than_psum_banks_are_refused() {
        let (a, b) = (tensor(&[128, 128], &[0.0; 128 * 128], Dtype::F32), tensor(&[128, 4608], &vec![0.0; 128 * 4608], Dtype::F32));
        let err = matmul_k_outer::Call::new(&a, &b).launch(&fp32()).unwrap_err().to_string();
        assert!(err.contains("N must be a multiple of 512 up to 8 tiles, got 4608"), "{err}");
    }
}

/// Per-block statistics kept in lists of tiles.
mod blockwise_logsumexp {
    use super::*;

    /// `ln Σ_j exp(x[r, j])` per row, shifted by the row maximum.
    fn reference(x: &[f64], m: usize) -> Vec<f64> {
        x.chunks(m)
            .map(|row| {
                let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                mx + row.iter().map(|v| (v - mx).exp()).sum::<f64>().ln()
            })
            .collect()
    }

    #[test]
    fn lists_of_blocks_and_statistics_match_float64_in_both_executors() {
        let (n, m) = (256, 1536);
        let x = uniform(n * m, 42, -8.0, 8.0);
        let want = reference(&x, m);
        let out = logsumexp::Call::new(&tensor(&[n, m], &x, Dtype::F32)).launch(&fp32()).unwrap();
        assert_eq!(out.shape(), &[n, 1]);
        assert_close("logsumexp", &out.to_f32_vec(), &want, 1e-5, 1e-5);
        let np = run_numpy("logsumexp", &[Arg::Tensor(vec![n, m], x, Dtype::F32)], 1, "fp32");
        assert_close("logsumexp numpy", &np[0], &want, 1e-5, 1e-5);
        let src = logsumexp::NKI_SOURCE;
        let blocks = "blocks = [load_block(x, i * TILE, b * BLOCK, TILE, BLOCK) for b in range(m // BLOCK)]";
        assert!(src.contains(blocks), "{src}");
    }
}

mod block_transpose {
    use super::*;

    #[test]
    fn transposes_exactly_in_every_dtype() {
        let (n, m) = (256, 384);
        for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
            let x = as_dtype(&uniform(n * m, 16, -100.0, 100.0), dtype);
            let out = transpose::Call::new(&tensor(&[n, m], &x, dtype)).launch(&Launch::new()).unwrap();
            assert_eq!((out.shape(), out.dtype()), (&[m, n][..], dtype));
            let want: Vec<f64> = (0..m * n).map(|idx| x[(idx % n) * m + idx / n]).collect();
            assert_close(&format!("transpose {dtype}"), &out.to_f32_vec(), &want, 0.0, 0.0);
        }
    }

    #[test]
    fn emitted_kernel_under_numpy_matches_the_emulator() {
        let (n, m) = (128, 256);
        let x = uniform(n * m, 17, -1.0, 1.0);
        let emu = transpose::Call::new(&tensor(&[n, m], &x, Dtype::F32)).launch(&fp32()).unwrap();
        let emu_vals: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
        let np = run_numpy("transpose", &[Arg::Tensor(vec![n, m], x, Dtype::F32)], 1, "fp32");
        assert_close("transpose numpy vs emulator", &np[0], &emu_vals, 0.0, 0.0);
    }
}

/// Every generation: the emitted kernels run under NumPy on trn1, trn2 and trn3
/// with each generation's limits and agree with the emulator launched for the same
/// generation, on the generations each kernel supports; on the others (LNC2 has no
/// trn1, `activate2` only trn3) both artifacts refuse it, naming the generation.
mod generations {
    use super::*;
    use common::{as_f32, emitted_package, try_run_numpy_on};
    use nki::hw::Generation;
    use nki::{Result, Tensor};
    use nki_examples::temperature_softmax::temperature_softmax;
    use nkilib::cumsum::cumsum::cumsum;

    const ALL: &[Generation] = &[Generation::Trn1, Generation::Trn2, Generation::Trn3];

    fn name(g: Generation) -> &'static str {
        match g {
            Generation::Trn1 => "trn1",
            Generation::Trn2 => "trn2",
            Generation::Trn3 => "trn3",
        }
    }

    /// Runs `kernel` in both artifacts on every generation: equal outputs where
    /// `supported`, a refusal naming the generation (or what it lacks) elsewhere.
    fn on_every_generation(
        kernel: &str,
        lnc: usize,
        args: &[Arg],
        supported: &[Generation],
        lacks: &str,
        emulate: impl Fn(&Launch) -> Result<Tensor>,
    ) {
        let ranks = [args.to_vec()];
        for &g in ALL {
            let launch = fp32().lnc(lnc).generation(g);
            let np = try_run_numpy_on(emitted_package(), kernel, &ranks, lnc, "fp32", name(g)).map(as_f32);
            if supported.contains(&g) {
                let emu: Vec<f64> =
                    emulate(&launch).unwrap_or_else(|e| panic!("{kernel} on {g:?}: {e}")).to_f32_vec().into_iter().map(f64::from).collect();
                let np = np.unwrap_or_else(|e| panic!("{kernel} under NumPy on {g:?}: {e}"));
                assert_close(&format!("{kernel} numpy vs emulator on {}", name(g)), &np[0][0], &emu, FP32_ATOL, FP32_RTOL);
            } else {
                let e = emulate(&launch).expect_err(&format!("{kernel} ran on {g:?}, which it does not support"));
                assert!(e.to_string().contains(name(g)) || e.to_string().contains(lacks), "{kernel} on {g:?}: {e}");
                let e = np.expect_err(&format!("{kernel} ran under NumPy on {g:?}, which it does not support"));
                assert!(e.contains(name(g)) || e.contains(lacks), "{kernel} under NumPy on {g:?}: {e}");
            }
        }
    }

    #[test]
    fn one_program_kernels_run_on_every_generation() {
        let (n, m) = (256, 96);
        let (a, b) = (uniform(n * m, 81, -2.0, 2.0), uniform(n * m, 82, -2.0, 2.0));
        let (ta, tb) = (tensor(&[n, m], &a, Dtype::F32), tensor(&[n, m], &b, Dtype::F32));
        let args = [Arg::Tensor(vec![n, m], a.clone(), Dtype::F32), Arg::Tensor(vec![n, m], b.clone(), Dtype::F32)];
        on_every_generation("tensor_add", 1, &args, ALL, "", |l| tensor_add::Call::new(&ta, &tb).launch(l));

        let x = uniform(128 * 130, 83, -5.0, 5.0);
        let tx = tensor(&[128, 130], &x, Dtype::F32);
        on_every_generation("softmax", 1, &[Arg::Tensor(vec![128, 130], x.clone(), Dtype::F32)], ALL, "", |l| {
            softmax::Call::new(&tx).launch(l)
        });

        let (k, mm, nn) = (256, 128, 512);
        let (p, q) = (uniform(k * mm, 84, -1.0, 1.0), uniform(k * nn, 85, -1.0, 1.0));
        let (tp, tq) = (tensor(&[k, mm], &p, Dtype::F32), tensor(&[k, nn], &q, Dtype::F32));
        let args = [Arg::Tensor(vec![k, mm], p.clone(), Dtype::F32), Arg::Tensor(vec![k, nn], q.clone(), Dtype::F32)];
        on_every_generation("matmul", 1, &args, ALL, "", |l| matmul::Call::new(&tp, &tq).launch(l));

        let c = uniform(128 * 300, 86, -1.0, 1.0);
        let tc = tensor(&[128, 300], &c, Dtype::F32);
        on_every_generation("cumsum", 1, &[Arg::Tensor(vec![128, 300], c.clone(), Dtype::F32)], ALL, "", |l| {
            cumsum::Call::new(&tc).launch(l)
        });
    }

    #[test]
    fn lnc2_kernels_run_on_trn2_and_trn3_and_are_refused_on_trn1() {
        let (n, m) = (384, 64);
        let (a, b) = (uniform(n * m, 87, -2.0, 2.0), uniform(n * m, 88, -2.0, 2.0));
        let (ta, tb) = (tensor(&[n, m], &a, Dtype::F32), tensor(&[n, m], &b, Dtype::F32));
        let args = [Arg::Tensor(vec![n, m], a.clone(), Dtype::F32), Arg::Tensor(vec![n, m], b.clone(), Dtype::F32)];
        on_every_generation("tensor_add", 2, &args, &[Generation::Trn2, Generation::Trn3], "LNC", |l| {
            tensor_add::Call::new(&ta, &tb).launch(l)
        });
    }

    #[test]
    fn trn3_kernels_are_refused_on_trn1_and_trn2() {
        let x = uniform(128 * 64, 89, -3.0, 3.0);
        let tx = tensor(&[128, 64], &x, Dtype::F32);
        let args = [Arg::Tensor(vec![128, 64], x.clone(), Dtype::F32), Arg::Float(0.5)];
        on_every_generation("temperature_softmax", 1, &args, &[Generation::Trn3], "NeuronCore-v4", |l| {
            temperature_softmax::Call::new(&tx, 0.5).launch(l)
        });
    }
}
