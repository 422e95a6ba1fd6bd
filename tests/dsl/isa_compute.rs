//! `nisa::tensor_partition_reduce`, `nisa::topk`, `nisa::activate2`, a unary
//! ALU op (`nl::abs`) in `nisa::tensor_scalar_reduce` and a PSUM tensor spanning
//! banks in kernels: the emulator and the emitted kernels under the NumPy
//! executor against float64 references written from the docs.

use crate::common::{Arg, as_f32, assert_close, package_of, run_numpy_ranks, tensor, try_run_numpy_on, uniform};
use nki::prelude::*;

/// Column sums, means and maxima of `x` `[P, F]` (P <= 128) across its partitions.
#[nki_kernel]
pub fn column_stats(x: Hbm) -> (Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let s = nl::ndarray([p, f], x.dtype());
    nisa::dma_copy(s, x);
    let sum = nl::ndarray([1, f], nl::float32);
    let mean = nl::ndarray([1, f], nl::float32);
    let top = nl::ndarray([1, f], nl::float32);
    nisa::tensor_partition_reduce(sum, nl::add, s);
    nisa::tensor_partition_reduce(mean, nl::average, s);
    nisa::tensor_partition_reduce(top, nl::maximum, s);
    let outs = (
        nl::ndarray([1, f], nl::float32, buffer = nl::shared_hbm),
        nl::ndarray([1, f], nl::float32, buffer = nl::shared_hbm),
        nl::ndarray([1, f], nl::float32, buffer = nl::shared_hbm),
    );
    nisa::dma_copy(outs.0, sum);
    nisa::dma_copy(outs.1, mean);
    nisa::dma_copy(outs.2, top);
    outs
}

/// |x| and each row's largest |x|: `nl::abs` is a unary ALU op (the docs' ALU
/// table), so tensor_scalar_reduce takes it as `op0` with operand 0.
#[nki_kernel]
pub fn row_abs_max(x: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let s = nl::ndarray([p, f], x.dtype());
    nisa::dma_copy(s, x);
    let mags = nl::ndarray([p, f], nl::float32);
    let peak = nl::ndarray([p, 1], nl::float32);
    nisa::tensor_scalar_reduce(mags, s, nl::abs, 0.0, nl::maximum, reduce_res = peak);
    let outs = (nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm), nl::ndarray([p, 1], nl::float32, buffer = nl::shared_hbm));
    nisa::dma_copy(outs.0, mags);
    nisa::dma_copy(outs.1, peak);
    outs
}

/// `a.T @ b` (`a` `[K, M]`, `b` `[K, N]`, N a multiple of 512) in one PSUM tensor
/// spanning N / 512 banks: one matmul per bank, one copy out of PSUM.
#[nki_kernel]
pub fn wide_psum_product(a: Hbm, b: Hbm) -> Hbm {
    let [k, m] = a.shape();
    let n = b.shape()[1];
    let st = nl::ndarray([k, m], a.dtype());
    let mv = nl::ndarray([k, n], b.dtype());
    nisa::dma_copy(st, a);
    nisa::dma_copy(mv, b);
    // fp32 columns of one PSUM bank: what one matmul writes
    let bank = nl::tile_size::psum_bank_fmax;
    let acc = nl::ndarray([m, n], nl::float32, buffer = nl::psum);
    for j in nl::static_range(n / bank) {
        nisa::nc_matmul(acc[s![.., j * bank..(j + 1) * bank]], st, mv[s![.., j * bank..(j + 1) * bank]]);
    }
    let res = nl::ndarray([m, n], nl::float32);
    nisa::tensor_copy(res, acc);
    let out = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, res);
    out
}

/// The `k` largest of each 16-partition snake of `n` bf16 values in `x`.
#[nki_kernel]
pub fn snake_topk(x: Hbm, n: i64, k: i64) -> (Hbm, Hbm) {
    let [p, cols] = x.shape();
    let src = nl::ndarray([p, cols], nl::bfloat16);
    nisa::dma_copy(src, x);
    let vals = nl::ndarray([p, k], nl::bfloat16);
    let idx = nl::ndarray([p, k], nl::uint32);
    nisa::topk(val_dst = vals, idx_dst = idx, src = src, n = n);
    let out_v = nl::ndarray([p, k], nl::bfloat16, buffer = nl::shared_hbm);
    let out_i = nl::ndarray([p, k], nl::uint32, buffer = nl::shared_hbm);
    nisa::dma_copy(out_v, vals);
    nisa::dma_copy(out_i, idx);
    (out_v, out_i)
}

/// `prelu(shift - 2 x)` with slope 0.25 and per-partition `shift` `[P, 1]`, and each row's maximum.
#[nki_kernel(target = "trn3")]
pub fn shifted_prelu(x: Hbm, shift: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let s = nl::ndarray([p, f], x.dtype());
    nisa::dma_copy(s, x);
    let c = nl::ndarray([p, 1], nl::float32);
    nisa::dma_copy(c, shift);
    let y = nl::ndarray([p, f], nl::bfloat16);
    let m = nl::ndarray([p, 1], nl::float32);
    nisa::activate2(
        y,
        nl::prelu,
        s,
        2.0,
        c,
        nl::multiply,
        nl::subtract,
        relu_param = 0.25,
        reverse1 = true,
        reduce_op = nl::maximum,
        reduce_res = m,
        reduce_cmd = nisa::reduce_cmd::reset_reduce,
    );
    let out = nl::ndarray([p, f], nl::bfloat16, buffer = nl::shared_hbm);
    let row_max = nl::ndarray([p, 1], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, y);
    nisa::dma_copy(row_max, m);
    (out, row_max)
}

#[test]
fn partition_reductions_agree_with_numpy_and_float64() {
    let (p, f) = (96usize, 20usize);
    // Multiples of 1/64 in [-4, 4): every f32 partial sum is exact.
    let x: Vec<f64> = uniform(p * f, 91, -4.0, 4.0).iter().map(|v| (v * 64.0).floor() / 64.0).collect();
    let xs = &x;
    let col = |j: usize| (0..p).map(move |i| xs[i * f + j]);
    let sum: Vec<f64> = (0..f).map(|j| col(j).sum()).collect();
    let mean: Vec<f64> = sum.iter().map(|s| f64::from((s / p as f64) as f32)).collect();
    let max: Vec<f64> = (0..f).map(|j| col(j).fold(f64::NEG_INFINITY, f64::max)).collect();
    let xt = tensor(&[p, f], &x, Dtype::F32);
    let (s, m, x_max) = column_stats::Call::new(&xt).launch(&Launch::new()).unwrap();
    for (what, got, want) in [("sum", &s, &sum), ("mean", &m, &mean), ("max", &x_max, &max)] {
        assert_close(&format!("emulated {what}"), &got.to_f32_vec(), want, 0.0, 0.0);
    }
    let pkg = package_of("partition_reduce_pkg", &[&column_stats::INFO]);
    let outs = run_numpy_ranks(&pkg, "column_stats", &[vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::F32)]], 1, "hardware").swap_remove(0);
    for ((what, want), got) in [("sum", &sum), ("mean", &mean), ("max", &max)].into_iter().zip(&outs) {
        assert_close(&format!("numpy {what}"), got, want, 0.0, 0.0);
    }
}

#[test]
fn abs_as_an_alu_op_agrees_with_numpy_and_float64() {
    let (p, f) = (128usize, 40usize);
    let x = uniform(p * f, 94, -5.0, 5.0);
    let x32: Vec<f64> = x.iter().map(|v| f64::from(*v as f32)).collect();
    let mags: Vec<f64> = x32.iter().map(|v| v.abs()).collect();
    let peaks: Vec<f64> = mags.chunks(f).map(|r| r.iter().copied().fold(0.0, f64::max)).collect();
    let (m, pk) = row_abs_max::Call::new(&tensor(&[p, f], &x, Dtype::F32)).launch(&Launch::new()).unwrap();
    assert_close("emulated |x|", &m.to_f32_vec(), &mags, 0.0, 0.0);
    assert_close("emulated row max |x|", &pk.to_f32_vec(), &peaks, 0.0, 0.0);
    let pkg = package_of("abs_alu_pkg", &[&row_abs_max::INFO]);
    let outs = run_numpy_ranks(&pkg, "row_abs_max", &[vec![Arg::Tensor(vec![p, f], x, Dtype::F32)]], 1, "hardware").swap_remove(0);
    assert_close("numpy |x|", &outs[0], &mags, 0.0, 0.0);
    assert_close("numpy row max |x|", &outs[1], &peaks, 0.0, 0.0);
}

#[test]
fn a_psum_tensor_spanning_banks_agrees_with_numpy_and_float64() {
    let (k, m, n) = (64usize, 96usize, 1024usize);
    let a = uniform(k * m, 95, -1.0, 1.0);
    let b = uniform(k * n, 96, -1.0, 1.0);
    let (a32, b32): (Vec<f64>, Vec<f64>) =
        (a.iter().map(|v| f64::from(*v as f32)).collect(), b.iter().map(|v| f64::from(*v as f32)).collect());
    let want: Vec<f64> = (0..m * n).map(|i| (0..k).map(|p| a32[p * m + i / n] * b32[p * n + i % n]).sum()).collect();
    let got =
        wide_psum_product::Call::new(&tensor(&[k, m], &a, Dtype::F32), &tensor(&[k, n], &b, Dtype::F32)).launch(&Launch::new()).unwrap();
    assert_close("emulated a.T @ b", &got.to_f32_vec(), &want, 1e-5, 1e-5);
    let pkg = package_of("wide_psum_pkg", &[&wide_psum_product::INFO]);
    let args = vec![Arg::Tensor(vec![k, m], a, Dtype::F32), Arg::Tensor(vec![k, n], b, Dtype::F32)];
    let outs = run_numpy_ranks(&pkg, "wide_psum_product", &[args], 1, "hardware").swap_remove(0);
    assert_close("numpy a.T @ b", &outs[0], &want, 1e-5, 1e-5);
    assert_eq!(outs[0], got.to_f32_vec(), "the emulator and the executor agree bit for bit");
}

#[test]
fn topk_agrees_with_numpy_and_a_float64_sort() {
    let (p, cols, n, k) = (32usize, 5usize, 75usize, 12usize);
    // Distinct bf16 values (successive bf16 codes, permuted, odd ones negated).
    let x: Vec<f64> = (0..p * cols)
        .map(|i| {
            let code = ((i * 37) % (p * cols)) as u32;
            let v = f64::from(f32::from_bits((0x3E00 + code) << 16));
            if code % 2 == 1 { -v } else { v }
        })
        .collect();
    let (mut want_v, mut want_i) = (Vec::new(), Vec::new());
    for g in 0..p / 16 {
        let mut snake: Vec<(f64, usize)> = (0..n).map(|e| (x[(g * 16 + e % 16) * cols + e / 16], e)).collect();
        snake.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        let top = &snake[n - k..];
        for _ in 0..16 {
            want_v.extend(top.iter().map(|t| t.0));
            want_i.extend(top.iter().map(|t| t.1 as f64));
        }
    }
    let xt = tensor(&[p, cols], &x, Dtype::Bf16);
    let (v, i) = snake_topk::Call::new(&xt, n as i64, k as i64).launch(&Launch::new()).unwrap();
    assert_close("emulated topk values", &v.to_f32_vec(), &want_v, 0.0, 0.0);
    assert_close("emulated topk indices", &i.to_f32_vec(), &want_i, 0.0, 0.0);
    let pkg = package_of("topk_pkg", &[&snake_topk::INFO]);
    let args = vec![Arg::Tensor(vec![p, cols], x, Dtype::Bf16), Arg::Int(n as i64), Arg::Int(k as i64)];
    let outs = run_numpy_ranks(&pkg, "snake_topk", &[args], 1, "hardware").swap_remove(0);
    assert_close("numpy topk values", &outs[0], &want_v, 0.0, 0.0);
    assert_close("numpy topk indices", &outs[1], &want_i, 0.0, 0.0);
}

#[test]
fn activate2_agrees_with_numpy_and_float64_in_both_precisions() {
    let (p, f) = (64usize, 48usize);
    let x = uniform(p * f, 92, -3.0, 3.0);
    let shift = uniform(p, 93, -1.0, 1.0);
    let pre = |i: usize| f64::from(shift[i / f] as f32) - 2.0 * f64::from(x[i] as f32);
    let act: Vec<f64> = (0..p * f).map(|i| if pre(i) >= 0.0 { pre(i) } else { 0.25 * pre(i) }).collect();
    let row_max: Vec<f64> = act.chunks(f).map(|r| r.iter().copied().fold(f64::NEG_INFINITY, f64::max)).collect();
    let pkg = package_of("activate2_pkg", &[&shifted_prelu::INFO]);
    for precision in [Precision::Fp32, Precision::Hardware] {
        let launch = Launch::new().generation(nki::hw::Generation::Trn3).precision(precision);
        let (xt, st) = (tensor(&[p, f], &x, Dtype::F32), tensor(&[p, 1], &shift, Dtype::F32));
        let (y, m) = shifted_prelu::Call::new(&xt, &st).launch(&launch).unwrap();
        // fp32 arithmetic, then bf16 (hardware) or fp32 (fp32 mode) values in `y`.
        let rtol = if precision == Precision::Hardware { 1.0 / 256.0 } else { 1e-6 };
        assert_close("emulated activate2", &y.to_f32_vec(), &act, 1e-6, rtol);
        assert_close("emulated activate2 row max", &m.to_f32_vec(), &row_max, 1e-6, 1e-6);
        let mode = if precision == Precision::Hardware { "hardware" } else { "fp32" };
        let args = vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::F32), Arg::Tensor(vec![p, 1], shift.clone(), Dtype::F32)];
        let outs = try_run_numpy_on(&pkg, "shifted_prelu", &[args], 1, mode, "trn3").map(as_f32).unwrap().swap_remove(0);
        assert_eq!(outs[0], y.to_f32_vec(), "numpy and emulator differ in {mode} mode");
        assert_eq!(outs[1], m.to_f32_vec(), "numpy and emulator row maxima differ in {mode} mode");
    }
}

#[test]
fn profiled_launches_record_each_instruction_on_its_engine() {
    use nki::profile::{Target, Unit};
    let slices = |launch: &Launch| -> Vec<(&'static str, Unit, f64)> {
        let p = launch.profiled().unwrap();
        p.timeline.slices.iter().flatten().map(|s| (s.op, s.unit, s.end_ns - s.start_ns)).collect()
    };
    let x = tensor(&[32, 16], &uniform(32 * 16, 94, -1.0, 1.0), Dtype::F32);
    let launch = Launch::new().profile(Target::Trn2);
    column_stats::Call::new(&x).launch(&launch).unwrap();
    assert!(slices(&launch).iter().any(|s| s.0 == "nisa.tensor_partition_reduce" && s.1 == Unit::GpSimd));
    let xb = tensor(&[32, 16], &uniform(32 * 16, 95, -1.0, 1.0), Dtype::Bf16);
    let launch = Launch::new().profile(Target::Trn2);
    snake_topk::Call::new(&xb, 256, 8).launch(&launch).unwrap();
    let topk = slices(&launch).into_iter().find(|s| s.0 == "nisa.topk").expect("topk profiled");
    assert_eq!(topk.1, Unit::GpSimd);
    // The documented 4 n + K cycles, n at the snake's capacity (16 x 16 columns).
    let ghz = nki::profile::Costs::of(Target::Trn2).ghz(Unit::GpSimd);
    assert!((topk.2 - (4.0 * 256.0 + 8.0) / ghz).abs() < 1e-6, "{topk:?}");
    let launch = Launch::new().generation(nki::hw::Generation::Trn3).profile(Target::Trn3);
    shifted_prelu::Call::new(&x, &tensor(&[32, 1], &[0.5; 32], Dtype::F32)).launch(&launch).unwrap();
    assert!(slices(&launch).iter().any(|s| s.0 == "nisa.activate2" && s.1 == Unit::Scalar));
}
