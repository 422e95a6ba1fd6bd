//! The `nki.language` tile functions that compute: every element-wise call on
//! tiles (activation functions, ALU ops, their broadcasts), the reductions,
//! `nl.matmul` and `nl.transpose`, emulated against float64 references of their documented
//! meaning in both precision models, and run under the NumPy executor.

use crate::common::{Arg, as_dtype, assert_close, package_of, run_numpy_ranks, tensor, uniform};
use nki::prelude::*;

/// How many results [`every_elementwise`] stores, one `[P, F]` block each.
const CASES: usize = 44;

/// Every element-wise tile function on `x` (any sign) and `y` (positive; the
/// operand of `log`, `sqrt`, `rsqrt`, `reciprocal` and the base of `power`),
/// then broadcasts against the `[P, 1]` column `col` and the `[1, F]` row `row`;
/// result `i` is stored at rows `i * P..(i + 1) * P` of a float32 output.
#[nki_kernel]
pub fn every_elementwise(x: Hbm, y: Hbm, col: Hbm, row: Hbm) -> Hbm {
    let [p, f] = x.shape();
    let out = nl::ndarray([44 * p, f], nl::float32, buffer = nl::shared_hbm);
    let a = nl::load(x);
    let b = nl::load(y);
    let c = nl::load(col);
    let r = nl::load(row);
    nl::store(out[s![0 * p..1 * p, ..]], nl::exp(a));
    nl::store(out[s![1 * p..2 * p, ..]], nl::log(b));
    nl::store(out[s![2 * p..3 * p, ..]], nl::copy(a));
    nl::store(out[s![3 * p..4 * p, ..]], nl::reciprocal(b));
    nl::store(out[s![4 * p..5 * p, ..]], nl::sqrt(b));
    nl::store(out[s![5 * p..6 * p, ..]], nl::rsqrt(b));
    nl::store(out[s![6 * p..7 * p, ..]], nl::square(a));
    nl::store(out[s![7 * p..8 * p, ..]], nl::abs(a));
    nl::store(out[s![8 * p..9 * p, ..]], nl::negative(a));
    nl::store(out[s![9 * p..10 * p, ..]], nl::tanh(a));
    nl::store(out[s![10 * p..11 * p, ..]], nl::sigmoid(a));
    nl::store(out[s![11 * p..12 * p, ..]], nl::relu(a));
    nl::store(out[s![12 * p..13 * p, ..]], nl::silu(a));
    nl::store(out[s![13 * p..14 * p, ..]], nl::gelu(a));
    nl::store(out[s![14 * p..15 * p, ..]], nl::gelu_apprx_tanh(a));
    nl::store(out[s![15 * p..16 * p, ..]], nl::gelu_apprx_sigmoid(a));
    nl::store(out[s![16 * p..17 * p, ..]], nl::erf(a));
    nl::store(out[s![17 * p..18 * p, ..]], nl::sin(a));
    nl::store(out[s![18 * p..19 * p, ..]], nl::cos(a));
    nl::store(out[s![19 * p..20 * p, ..]], nl::arctan(a));
    nl::store(out[s![20 * p..21 * p, ..]], nl::softplus(a));
    nl::store(out[s![21 * p..22 * p, ..]], nl::mish(a));
    nl::store(out[s![22 * p..23 * p, ..]], nl::sign(a));
    nl::store(out[s![23 * p..24 * p, ..]], nl::add(a, b));
    nl::store(out[s![24 * p..25 * p, ..]], nl::subtract(a, b));
    nl::store(out[s![25 * p..26 * p, ..]], nl::multiply(a, b));
    nl::store(out[s![26 * p..27 * p, ..]], nl::divide(a, b));
    nl::store(out[s![27 * p..28 * p, ..]], nl::maximum(a, b));
    nl::store(out[s![28 * p..29 * p, ..]], nl::minimum(a, b));
    nl::store(out[s![29 * p..30 * p, ..]], nl::power(b, a));
    nl::store(out[s![30 * p..31 * p, ..]], nl::less(a, b));
    nl::store(out[s![31 * p..32 * p, ..]], nl::less_equal(a, b));
    nl::store(out[s![32 * p..33 * p, ..]], nl::greater(a, b));
    nl::store(out[s![33 * p..34 * p, ..]], nl::greater_equal(a, b));
    nl::store(out[s![34 * p..35 * p, ..]], nl::equal(a, b));
    nl::store(out[s![35 * p..36 * p, ..]], nl::not_equal(a, b));
    nl::store(out[s![36 * p..37 * p, ..]], nl::logical_and(a, b));
    nl::store(out[s![37 * p..38 * p, ..]], nl::logical_or(a, b));
    nl::store(out[s![38 * p..39 * p, ..]], nl::add(a, c));
    nl::store(out[s![39 * p..40 * p, ..]], nl::subtract(r, a));
    nl::store(out[s![40 * p..41 * p, ..]], nl::subtract(2.0, a));
    nl::store(out[s![41 * p..42 * p, ..]], nl::multiply(a, 3));
    nl::store(out[s![42 * p..43 * p, ..]], nl::divide(c, b));
    nl::store(out[s![43 * p..44 * p, ..]], nl::maximum(a, r));
    out
}

/// `x @ y`, `xtᵀ @ y` and `xᵀ` (`x` `[M, K]`, `xt` `[K, M]`, `y` `[K, N]`), copied
/// out of PSUM with `nl.copy`.
#[nki_kernel]
pub fn tensor_engine_tiles(x: Hbm, xt: Hbm, y: Hbm) -> (Hbm, Hbm, Hbm) {
    let [m, k] = x.shape();
    let [_k, n] = y.shape();
    let prod = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
    let prod_t = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
    let tr = nl::ndarray([k, m], x.dtype(), buffer = nl::shared_hbm);
    let a = nl::load(x);
    let at = nl::load(xt);
    let b = nl::load(y);
    nl::store(prod, nl::copy(nl::matmul(a, b)));
    nl::store(prod_t, nl::copy(nl::matmul(at, b, transpose_x = true)));
    nl::store(tr, nl::copy(nl::transpose(a)));
    (prod, prod_t, tr)
}

/// 1.0 when `c` holds, else 0.0 (the comparisons' documented result).
fn truth(c: bool) -> f64 {
    if c { 1.0 } else { 0.0 }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// `erf` by its Maclaurin series (accurate to ~1e-15 for the |x| <= 2 used here).
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..80 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// GELU with the tanh approximation of its documentation.
fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

type Reference = fn(f64, f64, f64, f64) -> f64;

/// Each stored result in kernel order: its label and its meaning for an element
/// `a` of x, `b` of y, `c` of col (same row) and `r` of row (same column).
#[allow(unused_variables)]
const REFERENCES: [(&str, Reference); CASES] = [
    ("exp", |a, b, c, r| a.exp()),
    ("log", |a, b, c, r| b.ln()),
    ("copy", |a, b, c, r| a),
    ("reciprocal", |a, b, c, r| 1.0 / b),
    ("sqrt", |a, b, c, r| b.sqrt()),
    ("rsqrt", |a, b, c, r| 1.0 / b.sqrt()),
    ("square", |a, b, c, r| a * a),
    ("abs", |a, b, c, r| a.abs()),
    ("negative", |a, b, c, r| -a),
    ("tanh", |a, b, c, r| a.tanh()),
    ("sigmoid", |a, b, c, r| sigmoid(a)),
    ("relu", |a, b, c, r| a.max(0.0)),
    ("silu", |a, b, c, r| a * sigmoid(a)),
    ("gelu", |a, b, c, r| 0.5 * a * (1.0 + erf(a / 2f64.sqrt()))),
    ("gelu_apprx_tanh", |a, b, c, r| gelu_tanh(a)),
    ("gelu_apprx_sigmoid", |a, b, c, r| a * sigmoid(1.702 * a)),
    ("erf", |a, b, c, r| erf(a)),
    ("sin", |a, b, c, r| a.sin()),
    ("cos", |a, b, c, r| a.cos()),
    ("arctan", |a, b, c, r| a.atan()),
    ("softplus", |a, b, c, r| a.exp().ln_1p()),
    ("mish", |a, b, c, r| a * a.exp().ln_1p().tanh()),
    ("sign", |a, b, c, r| sign(a)),
    ("add", |a, b, c, r| a + b),
    ("subtract", |a, b, c, r| a - b),
    ("multiply", |a, b, c, r| a * b),
    ("divide", |a, b, c, r| a / b),
    ("maximum", |a, b, c, r| a.max(b)),
    ("minimum", |a, b, c, r| a.min(b)),
    ("power", |a, b, c, r| b.powf(a)),
    ("less", |a, b, c, r| truth(a < b)),
    ("less_equal", |a, b, c, r| truth(a <= b)),
    ("greater", |a, b, c, r| truth(a > b)),
    ("greater_equal", |a, b, c, r| truth(a >= b)),
    ("equal", |a, b, c, r| truth(a == b)),
    ("not_equal", |a, b, c, r| truth(a != b)),
    ("logical_and", |a, b, c, r| truth(a != 0.0 && b != 0.0)),
    ("logical_or", |a, b, c, r| truth(a != 0.0 || b != 0.0)),
    ("add a + column", |a, b, c, r| a + c),
    ("subtract row - a", |a, b, c, r| r - a),
    ("subtract 2.0 - a", |a, b, c, r| 2.0 - a),
    ("multiply a * 3", |a, b, c, r| a * 3.0),
    ("divide column / b", |a, b, c, r| c / b),
    ("maximum a, row", |a, b, c, r| a.max(r)),
];

/// Inputs on a quarter grid (exact in bfloat16, with zeros and ties for the
/// comparisons): x in [-2, 2), y, col and row in [0.25, 2).
fn inputs(p: usize, f: usize) -> [Vec<f64>; 4] {
    let quarters = |n, seed, lo| uniform(n, seed, lo, 2.0).into_iter().map(|v| (v * 4.0).floor() / 4.0).collect::<Vec<f64>>();
    [quarters(p * f, 11, -2.0), quarters(p * f, 12, 0.25), quarters(p, 13, 0.25), quarters(f, 14, 0.25)]
}

/// The float64 reference of every case, `CASES` blocks of `[p, f]`, from inputs as held in `dtype`.
fn reference(p: usize, f: usize, ins: &[Vec<f64>; 4], dtype: Dtype) -> Vec<Vec<f64>> {
    let [x, y, col, row] = ins.clone().map(|v| as_dtype(&v, dtype));
    REFERENCES.iter().map(|(_, op)| (0..p * f).map(|i| op(x[i], y[i], col[i / f], row[i % f])).collect()).collect()
}

fn run(p: usize, f: usize, ins: &[Vec<f64>; 4], dtype: Dtype, launch: Launch) -> Vec<f32> {
    let [x, y, col, row] = ins;
    every_elementwise::Call::new(
        &tensor(&[p, f], x, dtype),
        &tensor(&[p, f], y, dtype),
        &tensor(&[p, 1], col, dtype),
        &tensor(&[1, f], row, dtype),
    )
    .launch(&launch)
    .unwrap()
    .to_f32_vec()
}

#[test]
fn elementwise_calls_match_float64_in_fp32() {
    let (p, f) = (32, 24);
    let ins = inputs(p, f);
    let got = run(p, f, &ins, Dtype::F32, Launch::new().precision(Precision::Fp32));
    for (i, want) in reference(p, f, &ins, Dtype::F32).iter().enumerate() {
        assert_close(REFERENCES[i].0, &got[i * p * f..(i + 1) * p * f], want, 1e-6, 2e-6);
    }
}

#[test]
fn elementwise_calls_round_once_into_bfloat16_in_hardware_mode() {
    let (p, f) = (32, 24);
    let ins = inputs(p, f);
    let got = run(p, f, &ins, Dtype::Bf16, Launch::new());
    for (i, want) in reference(p, f, &ins, Dtype::Bf16).iter().enumerate() {
        // The result tile is bfloat16 (the operands' dtype): one rounding of a float32 value.
        let got_i = &got[i * p * f..(i + 1) * p * f];
        assert!(got_i.iter().all(|&v| v == nki::dtype::round_f32(Dtype::Bf16, v)), "{} not rounded to bfloat16", REFERENCES[i].0);
        assert_close(REFERENCES[i].0, got_i, want, 1e-6, 2f64.powi(-8));
    }
}

#[test]
fn elementwise_calls_under_numpy_match_the_emulator() {
    let (p, f) = (32, 24);
    let ins = inputs(p, f);
    let emu = run(p, f, &ins, Dtype::F32, Launch::new().precision(Precision::Fp32));
    let [x, y, col, row] = ins;
    let args = vec![
        Arg::Tensor(vec![p, f], x, Dtype::F32),
        Arg::Tensor(vec![p, f], y, Dtype::F32),
        Arg::Tensor(vec![p, 1], col, Dtype::F32),
        Arg::Tensor(vec![1, f], row, Dtype::F32),
    ];
    let pkg = package_of("every_elementwise_pkg", &[&every_elementwise::INFO]);
    let np = run_numpy_ranks(&pkg, "every_elementwise", &[args], 1, "fp32").swap_remove(0).swap_remove(0);
    for (i, (label, _)) in REFERENCES.iter().enumerate() {
        let emu_i: Vec<f64> = emu[i * p * f..(i + 1) * p * f].iter().map(|&v| f64::from(v)).collect();
        assert_close(&format!("{label} numpy vs emulator"), &np[i * p * f..(i + 1) * p * f], &emu_i, 1e-7, 1e-6);
    }
}

/// `x @ y` of `[m, k]` and `[k, n]` in float64.
fn matmul_f64(x: &[f64], y: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|i| (0..k).map(|j| x[i / n * k + j] * y[j * n + i % n]).sum()).collect()
}

fn transposed(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect()
}

fn tensor_engine_args(m: usize, k: usize, n: usize, dtype: Dtype) -> (Vec<f64>, Vec<f64>) {
    (as_dtype(&uniform(m * k, 21, -1.0, 1.0), dtype), as_dtype(&uniform(k * n, 22, -1.0, 1.0), dtype))
}

#[test]
fn matmul_and_transpose_match_float64_in_both_precisions_and_under_numpy() {
    let (m, k, n) = (96, 128, 80);
    for (dtype, launch, tol) in [(Dtype::F32, Launch::new().precision(Precision::Fp32), 1e-5), (Dtype::Bf16, Launch::new(), 1e-5)] {
        let (x, y) = tensor_engine_args(m, k, n, dtype);
        let xt = transposed(&x, m, k);
        let (prod, prod_t, tr) =
            tensor_engine_tiles::Call::new(&tensor(&[m, k], &x, dtype), &tensor(&[k, m], &xt, dtype), &tensor(&[k, n], &y, dtype))
                .launch(&launch)
                .unwrap();
        // bfloat16 products are exact in float32; both forms accumulate in float32.
        let want = matmul_f64(&x, &y, m, k, n);
        assert_close(&format!("matmul {dtype:?}"), &prod.to_f32_vec(), &want, tol, tol);
        assert_close(&format!("matmul transpose_x {dtype:?}"), &prod_t.to_f32_vec(), &want, tol, tol);
        assert_close(&format!("transpose {dtype:?}"), &tr.to_f32_vec(), &xt, 0.0, 0.0);
        if dtype == Dtype::F32 {
            let args = vec![
                Arg::Tensor(vec![m, k], x.clone(), dtype),
                Arg::Tensor(vec![k, m], xt.clone(), dtype),
                Arg::Tensor(vec![k, n], y.clone(), dtype),
            ];
            let pkg = package_of("tensor_engine_tiles_pkg", &[&tensor_engine_tiles::INFO]);
            let np = run_numpy_ranks(&pkg, "tensor_engine_tiles", &[args], 1, "fp32").swap_remove(0);
            for (label, got, emu) in [("matmul", &np[0], &prod), ("matmul transpose_x", &np[1], &prod_t), ("transpose", &np[2], &tr)] {
                let emu: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
                assert_close(&format!("{label} numpy vs emulator"), got, &emu, 1e-6, 1e-6);
            }
        }
    }
}

/// `nl.sum`, `max`, `min`, `prod` and `mean` of `x` `[P, A, B]` over both free
/// dims (kept as 1s, stored as columns 0..5 of the first output, in `dtype`), and
/// `nl.mean` over the last one only (dims dropped: `[P, A]`, the second output).
#[nki_kernel]
pub fn every_reduction(x: Hbm) -> (Hbm, Hbm) {
    let [p, a, _b] = x.shape();
    let whole = nl::ndarray([p, 5], x.dtype(), buffer = nl::shared_hbm);
    let last = nl::ndarray([p, a], x.dtype(), buffer = nl::shared_hbm);
    let t = nl::load(x);
    nl::store(whole[s![.., 0..1]], nl::sum(t, (1, 2), keepdims = true));
    nl::store(whole[s![.., 1..2]], nl::max(t, (1, 2), keepdims = true));
    nl::store(whole[s![.., 2..3]], nl::min(t, (1, 2), keepdims = true));
    nl::store(whole[s![.., 3..4]], nl::prod(t, (1, 2), keepdims = true));
    nl::store(whole[s![.., 4..5]], nl::mean(t, (1, 2), keepdims = true));
    nl::store(last, nl::mean(t, -1));
    (whole, last)
}

/// Per row of `[p, n]` values: sum, max, min, product and mean.
fn row_reductions(x: &[f64], n: usize) -> Vec<[f64; 5]> {
    x.chunks(n)
        .map(|r| {
            let sum: f64 = r.iter().sum();
            [
                sum,
                r.iter().copied().fold(f64::MIN, f64::max),
                r.iter().copied().fold(f64::MAX, f64::min),
                r.iter().product(),
                sum / n as f64,
            ]
        })
        .collect()
}

#[test]
fn reductions_match_float64_in_both_precisions_and_under_numpy() {
    let (p, a, b) = (32, 4, 6);
    for (dtype, launch, rtol) in [(Dtype::F32, Launch::new().precision(Precision::Fp32), 1e-6), (Dtype::Bf16, Launch::new(), 2f64.powi(-8))]
    {
        let x = as_dtype(&uniform(p * a * b, 41, 0.5, 1.5), dtype);
        let (whole, last) = every_reduction::Call::new(&tensor(&[p, a, b], &x, dtype)).launch(&launch).unwrap();
        let (whole, last) = (whole.to_f32_vec(), last.to_f32_vec());
        let rows = row_reductions(&x, a * b);
        for (k, label) in ["sum", "max", "min", "prod", "mean"].iter().enumerate() {
            let got: Vec<f32> = (0..p).map(|r| whole[r * 5 + k]).collect();
            let want: Vec<f64> = rows.iter().map(|r| r[k]).collect();
            assert_close(&format!("{label} {dtype:?}"), &got, &want, 0.0, rtol);
        }
        let want: Vec<f64> = row_reductions(&x, b).iter().map(|r| r[4]).collect();
        assert_close(&format!("mean over the last dim {dtype:?}"), &last, &want, 0.0, rtol);
        if dtype == Dtype::F32 {
            let pkg = package_of("every_reduction_pkg", &[&every_reduction::INFO]);
            let np =
                run_numpy_ranks(&pkg, "every_reduction", &[vec![Arg::Tensor(vec![p, a, b], x.clone(), dtype)]], 1, "fp32").swap_remove(0);
            for (got, emu) in [(&np[0], &whole), (&np[1], &last)] {
                let emu: Vec<f64> = emu.iter().map(|&v| f64::from(v)).collect();
                assert_close("reductions numpy vs emulator", got, &emu, 0.0, 1e-6);
            }
        }
    }
}
