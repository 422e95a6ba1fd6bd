//! The remaining `nki.language` element-wise tile functions (rounding, `tan`,
//! the activation derivatives, logical and bitwise ops, remainders), emulated
//! against float64 / exact integer references of their documented meaning in
//! both precision models, and run under the NumPy executor.

use crate::common::{Arg, as_dtype, assert_close, package_of, run_numpy_ranks, tensor, uniform};
use nki::prelude::*;
use std::f64::consts::{PI, SQRT_2};

/// Float results [`more_elementwise`] stores, one `[P, F]` block each.
const FLOAT_CASES: usize = 15;
/// Integer results, one `[P, F]` block each.
const INT_CASES: usize = 7;

/// The element-wise functions on float tiles `x` (any sign), `y` (positive) and
/// `z` (any sign, with zeros), and on int32 tiles `i` (any sign) and `s` (shift
/// counts 0..8). Float result `k` is rows `k * P..(k + 1) * P` of the first
/// output, integer result `k` of the second.
#[nki_kernel]
pub fn more_elementwise(x: Hbm, y: Hbm, z: Hbm, #[dtypes(int32)] i: Hbm, #[dtypes(int32)] s: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let out = nl::ndarray([15 * p, f], nl::float32, buffer = nl::shared_hbm);
    let ints = nl::ndarray([7 * p, f], nl::int32, buffer = nl::shared_hbm);
    let a = nl::load(x);
    let b = nl::load(y);
    let c = nl::load(z);
    let n = nl::load(i);
    let k = nl::load(s);
    nl::store(out[s![0 * p..1 * p, ..]], nl::ceil(a));
    nl::store(out[s![1 * p..2 * p, ..]], nl::floor(a));
    nl::store(out[s![2 * p..3 * p, ..]], nl::trunc(a));
    nl::store(out[s![3 * p..4 * p, ..]], nl::tan(a));
    nl::store(out[s![4 * p..5 * p, ..]], nl::erf_dx(a));
    nl::store(out[s![5 * p..6 * p, ..]], nl::gelu_dx(a));
    nl::store(out[s![6 * p..7 * p, ..]], nl::gelu_apprx_sigmoid_dx(a));
    nl::store(out[s![7 * p..8 * p, ..]], nl::silu_dx(a));
    nl::store(out[s![8 * p..9 * p, ..]], nl::logical_not(c));
    nl::store(out[s![9 * p..10 * p, ..]], nl::logical_xor(a, c));
    nl::store(out[s![10 * p..11 * p, ..]], nl::abs_max(a, c));
    nl::store(out[s![11 * p..12 * p, ..]], nl::abs_min(a, c));
    nl::store(out[s![12 * p..13 * p, ..]], nl::fmod(a, b));
    nl::store(out[s![13 * p..14 * p, ..]], nl::r#mod(a, b));
    nl::store(out[s![14 * p..15 * p, ..]], nl::r#mod(a, -0.75));
    nl::store(ints[s![0 * p..1 * p, ..]], nl::bitwise_and(n, k));
    nl::store(ints[s![1 * p..2 * p, ..]], nl::bitwise_or(n, k));
    nl::store(ints[s![2 * p..3 * p, ..]], nl::bitwise_xor(n, k));
    nl::store(ints[s![3 * p..4 * p, ..]], nl::invert(n));
    nl::store(ints[s![4 * p..5 * p, ..]], nl::left_shift(n, k));
    nl::store(ints[s![5 * p..6 * p, ..]], nl::right_shift(n, k));
    nl::store(ints[s![6 * p..7 * p, ..]], nl::left_shift(n, 3));
    (out, ints)
}

fn truth(c: bool) -> f64 {
    if c { 1.0 } else { 0.0 }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `erf` by its Maclaurin series (accurate to ~1e-15 for |x| <= 2).
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..80 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / PI.sqrt()
}

/// The forward functions whose derivatives the `*_dx` tokens are.
fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / SQRT_2))
}

fn gelu_apprx_sigmoid(x: f64) -> f64 {
    x * sigmoid(1.702 * x)
}

fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// The derivatives, from the product and chain rules.
fn erf_dx(x: f64) -> f64 {
    2.0 / PI.sqrt() * (-x * x).exp()
}

fn gelu_dx(x: f64) -> f64 {
    0.5 * (1.0 + erf(x / SQRT_2)) + x * (-0.5 * x * x).exp() / (2.0 * PI).sqrt()
}

fn gelu_apprx_sigmoid_dx(x: f64) -> f64 {
    let s = sigmoid(1.702 * x);
    s + x * 1.702 * s * (1.0 - s)
}

fn silu_dx(x: f64) -> f64 {
    let s = sigmoid(x);
    s + x * s * (1.0 - s)
}

/// Python's `%`: the remainder with the sign of the divisor.
fn py_mod(a: f64, b: f64) -> f64 {
    a - (a / b).floor() * b
}

type FloatRef = fn(f64, f64, f64) -> f64;

#[allow(unused_variables)]
const FLOAT_REFS: [(&str, FloatRef); FLOAT_CASES] = [
    ("ceil", |a, b, c| a.ceil()),
    ("floor", |a, b, c| a.floor()),
    ("trunc", |a, b, c| a.trunc()),
    ("tan", |a, b, c| a.tan()),
    ("erf_dx", |a, b, c| erf_dx(a)),
    ("gelu_dx", |a, b, c| gelu_dx(a)),
    ("gelu_apprx_sigmoid_dx", |a, b, c| gelu_apprx_sigmoid_dx(a)),
    ("silu_dx", |a, b, c| silu_dx(a)),
    ("logical_not", |a, b, c| truth(c == 0.0)),
    ("logical_xor", |a, b, c| truth((a != 0.0) != (c != 0.0))),
    ("abs_max", |a, b, c| a.abs().max(c.abs())),
    ("abs_min", |a, b, c| a.abs().min(c.abs())),
    ("fmod", |a, b, c| a - (a / b).trunc() * b),
    ("mod", |a, b, c| py_mod(a, b)),
    ("mod by -0.75", |a, b, c| py_mod(a, -0.75)),
];

type IntRef = fn(i64, i64) -> i64;

const INT_REFS: [(&str, IntRef); INT_CASES] = [
    ("bitwise_and", |n, k| n & k),
    ("bitwise_or", |n, k| n | k),
    ("bitwise_xor", |n, k| n ^ k),
    ("invert", |n, _| !n),
    ("left_shift", |n, k| n << k),
    ("right_shift (arithmetic)", |n, k| n >> k),
    ("left_shift by 3", |n, _| n << 3),
];

struct Inputs {
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
    i: Vec<f64>,
    s: Vec<f64>,
}

/// Floats on a quarter grid (exact in bfloat16; zeros and halves for the rounding
/// ties and the logical ops): x, z in [-2, 2), y in [0.25, 2); integers i in
/// [-1000, 1000), shift counts s in 0..8.
fn inputs(p: usize, f: usize) -> Inputs {
    let quarters = |seed, lo| uniform(p * f, seed, lo, 2.0).into_iter().map(|v| (v * 4.0).floor() / 4.0).collect::<Vec<f64>>();
    Inputs {
        x: quarters(31, -2.0),
        y: quarters(32, 0.25),
        z: quarters(33, -2.0),
        i: uniform(p * f, 34, -1000.0, 1000.0).into_iter().map(f64::floor).collect(),
        s: uniform(p * f, 35, 0.0, 8.0).into_iter().map(f64::floor).collect(),
    }
}

fn run(p: usize, f: usize, ins: &Inputs, dtype: Dtype, launch: Launch) -> (Vec<f32>, Vec<f32>) {
    let (out, ints) = more_elementwise::Call::new(
        &tensor(&[p, f], &ins.x, dtype),
        &tensor(&[p, f], &ins.y, dtype),
        &tensor(&[p, f], &ins.z, dtype),
        &tensor(&[p, f], &ins.i, Dtype::I32),
        &tensor(&[p, f], &ins.s, Dtype::I32),
    )
    .launch(&launch)
    .unwrap();
    (out.to_f32_vec(), ints.to_f32_vec())
}

fn float_reference(p: usize, f: usize, ins: &Inputs, dtype: Dtype) -> Vec<Vec<f64>> {
    let (x, y, z) = (as_dtype(&ins.x, dtype), as_dtype(&ins.y, dtype), as_dtype(&ins.z, dtype));
    FLOAT_REFS.iter().map(|(_, op)| (0..p * f).map(|e| op(x[e], y[e], z[e])).collect()).collect()
}

fn check_ints(ins: &Inputs, got: &[f32], n: usize) {
    for (k, (label, op)) in INT_REFS.iter().enumerate() {
        for e in 0..n {
            let want = op(ins.i[e] as i64, ins.s[e] as i64);
            assert_eq!(got[k * n + e] as i64, want, "{label} of {} and {}", ins.i[e], ins.s[e]);
        }
    }
}

/// A real function of one variable.
type Scalar = fn(f64) -> f64;

#[test]
fn derivative_references_agree_with_central_differences_of_their_functions() {
    let h = 1e-5;
    let pairs: [(&str, Scalar, Scalar); 4] = [
        ("erf", erf, erf_dx),
        ("gelu", gelu, gelu_dx),
        ("gelu_apprx_sigmoid", gelu_apprx_sigmoid, gelu_apprx_sigmoid_dx),
        ("silu", silu, silu_dx),
    ];
    for (name, f, dx) in pairs {
        for x in (-16..=16).map(|k| f64::from(k) / 8.0) {
            let diff = (f(x + h) - f(x - h)) / (2.0 * h);
            assert!((diff - dx(x)).abs() < 1e-8, "{name}'(x = {x}): central difference {diff}, formula {}", dx(x));
        }
    }
}

#[test]
fn more_elementwise_calls_match_float64_and_exact_integers_in_fp32() {
    let (p, f) = (32, 24);
    let ins = inputs(p, f);
    let (got, ints) = run(p, f, &ins, Dtype::F32, Launch::new().precision(Precision::Fp32));
    for (k, want) in float_reference(p, f, &ins, Dtype::F32).iter().enumerate() {
        assert_close(FLOAT_REFS[k].0, &got[k * p * f..(k + 1) * p * f], want, 1e-6, 2e-6);
    }
    check_ints(&ins, &ints, p * f);
}

#[test]
fn more_elementwise_calls_round_once_into_bfloat16_in_hardware_mode() {
    let (p, f) = (32, 24);
    let ins = inputs(p, f);
    let (got, ints) = run(p, f, &ins, Dtype::Bf16, Launch::new());
    for (k, want) in float_reference(p, f, &ins, Dtype::Bf16).iter().enumerate() {
        let got_k = &got[k * p * f..(k + 1) * p * f];
        assert!(got_k.iter().all(|&v| v == nki::dtype::round_f32(Dtype::Bf16, v)), "{} not rounded to bfloat16", FLOAT_REFS[k].0);
        assert_close(FLOAT_REFS[k].0, got_k, want, 1e-6, 2f64.powi(-8));
    }
    check_ints(&ins, &ints, p * f);
}

#[test]
fn more_elementwise_calls_under_numpy_match_the_emulator() {
    let (p, f) = (32, 24);
    let ins = inputs(p, f);
    let (emu, emu_ints) = run(p, f, &ins, Dtype::F32, Launch::new().precision(Precision::Fp32));
    let args = vec![
        Arg::Tensor(vec![p, f], ins.x.clone(), Dtype::F32),
        Arg::Tensor(vec![p, f], ins.y.clone(), Dtype::F32),
        Arg::Tensor(vec![p, f], ins.z.clone(), Dtype::F32),
        Arg::Tensor(vec![p, f], ins.i.clone(), Dtype::I32),
        Arg::Tensor(vec![p, f], ins.s.clone(), Dtype::I32),
    ];
    let pkg = package_of("more_elementwise_pkg", &[&more_elementwise::INFO]);
    let np = run_numpy_ranks(&pkg, "more_elementwise", &[args], 1, "fp32").swap_remove(0);
    for (k, (label, _)) in FLOAT_REFS.iter().enumerate() {
        let emu_k: Vec<f64> = emu[k * p * f..(k + 1) * p * f].iter().map(|&v| f64::from(v)).collect();
        assert_close(&format!("{label} numpy vs emulator"), &np[0][k * p * f..(k + 1) * p * f], &emu_k, 1e-7, 1e-6);
    }
    let emu_ints: Vec<f64> = emu_ints.iter().map(|&v| f64::from(v)).collect();
    assert_close("integer ops numpy vs emulator", &np[1], &emu_ints, 0.0, 0.0);
}

/// `nl.softmax`, `nl.rms_norm` (scaled by the `[1, F]` row `w`), `nl.var`,
/// `nl.all` and `nl.where` (with a number and with a tile) of `x` `[P, F]` and
/// the mask `m`.
#[nki_kernel]
pub fn normalisations(x: Hbm, w: Hbm, m: Hbm) -> (Hbm, Hbm, Hbm, Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let sm = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
    let rn = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
    let vr = nl::ndarray([p, 1], x.dtype(), buffer = nl::shared_hbm);
    let al = nl::ndarray([p], x.dtype(), buffer = nl::shared_hbm);
    let wn = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
    let wt = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
    let t = nl::load(x);
    let scale = nl::load(w);
    let mask = nl::load(m);
    nl::store(sm, nl::softmax(t, axis = 1));
    nl::store(rn, nl::rms_norm(t, scale, 1, f, epsilon = 0.001));
    nl::store(vr, nl::var(t, 1));
    nl::store(al, nl::all(mask, 1));
    nl::store(wn, nl::r#where(mask, t, -1.0));
    nl::store(wt, nl::r#where(mask, t, nl::negative(t)));
    (sm, rn, vr, al, wn, wt)
}

/// Per row of `x` (`f` wide), with `w` and the mask `m`: softmax, rms_norm (eps
/// 1e-3), variance, all, where with -1, where with -x; in kernel output order.
fn normalisation_reference(x: &[f64], w: &[f64], m: &[f64], f: usize) -> [Vec<f64>; 6] {
    let mut out: [Vec<f64>; 6] = Default::default();
    for ((row, mrow), _) in x.chunks(f).zip(m.chunks(f)).zip(0..) {
        let max = row.iter().copied().fold(f64::MIN, f64::max);
        let z: f64 = row.iter().map(|v| (v - max).exp()).sum();
        out[0].extend(row.iter().map(|v| (v - max).exp() / z));
        let rms = (row.iter().map(|v| v * v).sum::<f64>() / f as f64 + 1e-3).sqrt();
        out[1].extend(row.iter().zip(w).map(|(v, s)| v / rms * s));
        let mean = row.iter().sum::<f64>() / f as f64;
        out[2].push(row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / f as f64);
        out[3].push(truth(mrow.iter().all(|&c| c != 0.0)));
        out[4].extend(row.iter().zip(mrow).map(|(&v, &c)| if c != 0.0 { v } else { -1.0 }));
        out[5].extend(row.iter().zip(mrow).map(|(&v, &c)| if c != 0.0 { v } else { -v }));
    }
    out
}

const NORMALISATIONS: [&str; 6] = ["softmax", "rms_norm", "var", "all", "where (number)", "where (tile)"];

/// `x` in [-2, 2), `w` in [0.5, 1.5), and a mask that is all ones on even rows and
/// has zeros on odd ones.
fn normalisation_inputs(p: usize, f: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let x = uniform(p * f, 51, -2.0, 2.0);
    let w = uniform(f, 52, 0.5, 1.5);
    let m = uniform(p * f, 53, 0.0, 1.0).iter().enumerate().map(|(i, &u)| truth((i / f).is_multiple_of(2) || u > 0.2)).collect();
    (x, w, m)
}

fn run_normalisations(p: usize, f: usize, dtype: Dtype, launch: Launch) -> ([Vec<f64>; 3], [Vec<f32>; 6]) {
    let (x, w, m) = normalisation_inputs(p, f);
    let (x, w) = (as_dtype(&x, dtype), as_dtype(&w, dtype));
    let outs = normalisations::Call::new(&tensor(&[p, f], &x, dtype), &tensor(&[1, f], &w, dtype), &tensor(&[p, f], &m, dtype))
        .launch(&launch)
        .unwrap();
    let (a, b, c, d, e, g) = outs;
    ([x, w, m], [a, b, c, d, e, g].map(|t| t.to_f32_vec()))
}

#[test]
fn normalisations_and_where_match_float64_in_both_precisions_and_under_numpy() {
    let (p, f) = (64, 48);
    for (dtype, launch, rtol) in [(Dtype::F32, Launch::new().precision(Precision::Fp32), 2e-6), (Dtype::Bf16, Launch::new(), 2f64.powi(-8))]
    {
        let ([x, w, m], got) = run_normalisations(p, f, dtype, launch);
        let want = normalisation_reference(&x, &w, &m, f);
        for (k, label) in NORMALISATIONS.iter().enumerate() {
            assert_close(&format!("{label} {dtype:?}"), &got[k], &want[k], 1e-6, rtol);
        }
        if dtype == Dtype::F32 {
            let args = vec![
                Arg::Tensor(vec![p, f], x.clone(), dtype),
                Arg::Tensor(vec![1, f], w.clone(), dtype),
                Arg::Tensor(vec![p, f], m.clone(), dtype),
            ];
            let pkg = package_of("normalisations_pkg", &[&normalisations::INFO]);
            let np = run_numpy_ranks(&pkg, "normalisations", &[args], 1, "fp32").swap_remove(0);
            for (k, label) in NORMALISATIONS.iter().enumerate() {
                let emu: Vec<f64> = got[k].iter().map(|&v| f64::from(v)).collect();
                assert_close(&format!("{label} numpy vs emulator"), &np[k], &emu, 1e-7, 1e-6);
            }
        }
    }
}

/// `nl.zeros_like` (on chip and in HBM), `nl.empty_like` and the buffer
/// predicates: the first output holds `x`'s zeros-like tile plus `x` copied into
/// an `empty_like` float32 tile, the second is a shared-HBM `zeros_like(x)`, the
/// third a row of 1/0 flags: `is_hbm(hbm)`, `is_hbm(sbuf)`, `is_sbuf(sbuf)`,
/// `is_psum(psum)`, `is_psum(sbuf)`, `is_on_chip(psum)`, `is_on_chip(shared_hbm)`.
#[nki_kernel]
pub fn likes_and_buffers(x: Hbm) -> (Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let out = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    let flags = nl::ndarray([1, 7], nl::float32, buffer = nl::shared_hbm);
    let t = nl::load(x);
    let z = nl::zeros_like(t);
    let e = nl::empty_like(t, dtype = nl::float32);
    nisa::tensor_tensor(e, t, z, nl::add);
    nl::store(out, e);
    let zh = nl::zeros_like(x, buffer = nl::shared_hbm);
    let row = nl::zeros([1, 7], nl::float32);
    if nl::is_hbm(nl::hbm) {
        nisa::memset(row[s![.., 0..1]], 1.0);
    }
    if nl::is_hbm(nl::sbuf) {
        nisa::memset(row[s![.., 1..2]], 1.0);
    }
    if nl::is_sbuf(nl::sbuf) {
        nisa::memset(row[s![.., 2..3]], 1.0);
    }
    if nl::is_psum(nl::psum) {
        nisa::memset(row[s![.., 3..4]], 1.0);
    }
    if nl::is_psum(nl::sbuf) {
        nisa::memset(row[s![.., 4..5]], 1.0);
    }
    if nl::is_on_chip(nl::psum) {
        nisa::memset(row[s![.., 5..6]], 1.0);
    }
    if nl::is_on_chip(nl::shared_hbm) {
        nisa::memset(row[s![.., 6..7]], 1.0);
    }
    nl::store(flags, row);
    (out, zh, flags)
}

#[test]
fn like_constructors_and_buffer_predicates_in_the_emulator_and_under_numpy() {
    let (p, f) = (16, 8);
    let x = uniform(p * f, 61, -1.0, 1.0);
    let (out, zh, flags) = likes_and_buffers::Call::new(&tensor(&[p, f], &x, Dtype::Bf16)).launch(&Launch::new()).unwrap();
    let (out, zh, flags) = (out.to_f32_vec(), zh, flags.to_f32_vec());
    assert_close("x + zeros_like(x) in an empty_like float32 tile", &out, &as_dtype(&x, Dtype::Bf16), 0.0, 0.0);
    assert_eq!((zh.shape(), zh.dtype()), (&[p, f][..], Dtype::Bf16), "zeros_like(x) keeps x's shape and dtype");
    assert!(zh.to_f32_vec().iter().all(|&v| v == 0.0), "zeros_like in HBM holds zeros");
    assert_eq!(flags, [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0], "buffer predicates");
    let pkg = package_of("likes_and_buffers_pkg", &[&likes_and_buffers::INFO]);
    let np =
        run_numpy_ranks(&pkg, "likes_and_buffers", &[vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::Bf16)]], 1, "hardware").swap_remove(0);
    let emu: [Vec<f64>; 3] = [out, zh.to_f32_vec(), flags].map(|v| v.iter().map(|&x| f64::from(x)).collect());
    for (k, label) in ["empty_like / zeros_like", "zeros_like in HBM", "flags"].iter().enumerate() {
        assert_close(&format!("{label} numpy vs emulator"), &np[k], &emu[k], 0.0, 0.0);
    }
}

/// `nl.load_transpose2d` (in `x`'s dtype and in float32), `nl.broadcast_to` of a
/// `[P, 1]` column and of a `[1, F]` row, `nl.gather_flattened` of `x` by the
/// int32 `idx`, `nl.shared_identity_matrix`, `nl.expand_dims`, and a
/// `nl.device_print` of the column.
#[nki_kernel]
pub fn movement_tiles(x: Hbm, col: Hbm, row: Hbm, #[dtypes(int32)] idx: Hbm) -> (Hbm, Hbm, Hbm, Hbm, Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let [_p, k] = idx.shape();
    let tr = nl::ndarray([f, p], x.dtype(), buffer = nl::shared_hbm);
    let tr32 = nl::ndarray([f, p], nl::float32, buffer = nl::shared_hbm);
    let bc = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
    let br = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
    let g = nl::ndarray([p, k], x.dtype(), buffer = nl::shared_hbm);
    let id = nl::ndarray([p, p], nl::float32, buffer = nl::shared_hbm);
    let ex = nl::ndarray([p, 1, f], x.dtype(), buffer = nl::shared_hbm);
    let t = nl::load(x);
    let c = nl::load(col);
    let r = nl::load(row);
    let i = nl::load(idx);
    nl::device_print("column", c);
    nl::store(tr, nl::load_transpose2d(x));
    nl::store(tr32, nl::load_transpose2d(x, dtype = nl::float32));
    nl::store(bc, nl::broadcast_to(c, [p, f]));
    nl::store(br, nl::broadcast_to(r, [p, f]));
    nl::store(g, nl::gather_flattened(t, i));
    nl::store(id, nl::shared_identity_matrix(p, dtype = nl::float32));
    nl::store(ex, nl::expand_dims(t, 1));
    (tr, tr32, bc, br, g, id, ex)
}

#[test]
fn movement_tiles_match_their_definitions_in_both_precisions_and_under_numpy() {
    let (p, f, k) = (64, 48, 20);
    let idx: Vec<f64> = uniform(p * k, 71, 0.0, f as f64).into_iter().map(f64::floor).collect();
    for (dtype, launch, precision) in
        [(Dtype::F32, Launch::new().precision(Precision::Fp32), "fp32"), (Dtype::Bf16, Launch::new(), "hardware")]
    {
        let x = as_dtype(&uniform(p * f, 72, -2.0, 2.0), dtype);
        let col = as_dtype(&uniform(p, 73, -2.0, 2.0), dtype);
        let row = as_dtype(&uniform(f, 74, -2.0, 2.0), dtype);
        let outs = movement_tiles::Call::new(
            &tensor(&[p, f], &x, dtype),
            &tensor(&[p, 1], &col, dtype),
            &tensor(&[1, f], &row, dtype),
            &tensor(&[p, k], &idx, Dtype::I32),
        )
        .launch(&launch)
        .unwrap();
        let (tr, tr32, bc, br, g, id, ex) = outs;
        let got = [tr, tr32, bc, br, g, id, ex].map(|t| t.to_f32_vec());
        let transposed: Vec<f64> = (0..f * p).map(|e| x[(e % p) * f + e / p]).collect();
        let want = [
            transposed.clone(),
            transposed,
            (0..p * f).map(|e| col[e / f]).collect(),
            (0..p * f).map(|e| row[e % f]).collect(),
            (0..p * k).map(|e| x[(e / k) * f + idx[e] as usize]).collect(),
            (0..p * p).map(|e| truth(e / p == e % p)).collect(),
            x.clone(),
        ];
        let labels = [
            "load_transpose2d",
            "load_transpose2d float32",
            "broadcast_to column",
            "broadcast_to row",
            "gather_flattened",
            "identity",
            "expand_dims",
        ];
        for (l, (g, w)) in labels.iter().zip(got.iter().zip(&want)) {
            assert_close(&format!("{l} {dtype:?}"), g, w, 0.0, 0.0);
        }
        let args = vec![
            Arg::Tensor(vec![p, f], x.clone(), dtype),
            Arg::Tensor(vec![p, 1], col.clone(), dtype),
            Arg::Tensor(vec![1, f], row.clone(), dtype),
            Arg::Tensor(vec![p, k], idx.clone(), Dtype::I32),
        ];
        let pkg = package_of("movement_tiles_pkg", &[&movement_tiles::INFO]);
        let np = run_numpy_ranks(&pkg, "movement_tiles", &[args], 1, precision).swap_remove(0);
        for (l, (n, e)) in labels.iter().zip(np.iter().zip(&got)) {
            let e: Vec<f64> = e.iter().map(|&v| f64::from(v)).collect();
            assert_close(&format!("{l} numpy vs emulator {dtype:?}"), n, &e, 0.0, 0.0);
        }
    }
}

/// Prints a `[2, 3]` tile with `nl.device_print`.
#[nki_kernel]
pub fn print_tile(x: Hbm) {
    let t = nl::load(x);
    nl::device_print("the tile", t);
}

/// The test binary re-runs this test with `PRINT_CHILD` set to launch the kernel
/// alone, and checks what that child wrote to standard error.
#[test]
fn device_print_writes_the_prefix_kernel_line_rank_program_and_values_to_stderr() {
    let x = tensor(&[2, 3], &[1.0, 2.0, 3.0, 4.5, 5.0, -6.0], Dtype::F32);
    if std::env::var_os("PRINT_CHILD").is_some() {
        print_tile::Call::new(&x).launch(&Launch::new()).unwrap();
        return;
    }
    // The test's name in this binary: its module path without the crate's name.
    let name = format!(
        "{}::device_print_writes_the_prefix_kernel_line_rank_program_and_values_to_stderr",
        module_path!().split_once("::").unwrap().1
    );
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture"])
        .env("PRINT_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "the child failed: {}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = include_str!("nl_language.rs").lines().position(|l| l.contains("nl::device_print(\"the tile\"")).unwrap() + 1;
    let want = format!("the tile [tests/dsl/nl_language.rs:{line} rank 0 program 0] 't' [2, 3] float32 in SBUF:\n[1 2 3]\n[4.5 5 -6]\n");
    assert!(err.contains(&want), "stderr lacks\n{want}\ngot\n{err}");
}

/// `nl.invert` of a uint8 and an int16 tile.
#[nki_kernel]
pub fn invert_widths(#[dtypes(uint8)] a: Hbm, #[dtypes(int16)] b: Hbm) -> (Hbm, Hbm) {
    let ua = nl::ndarray(a.shape(), nl::uint8, buffer = nl::shared_hbm);
    let ib = nl::ndarray(b.shape(), nl::int16, buffer = nl::shared_hbm);
    nl::store(ua, nl::invert(nl::load(a)));
    nl::store(ib, nl::invert(nl::load(b)));
    (ua, ib)
}

#[test]
fn invert_flips_every_bit_of_the_dtype_in_the_emulator_and_under_numpy() {
    let a = [0.0, 5.0, 200.0, 255.0];
    let b = [0.0, 5.0, -300.0, 32767.0];
    let (ua, ib) =
        invert_widths::Call::new(&tensor(&[1, 4], &a, Dtype::U8), &tensor(&[1, 4], &b, Dtype::I16)).launch(&Launch::new()).unwrap();
    let (ua, ib) = (ua.to_f32_vec(), ib.to_f32_vec());
    assert_eq!(ua, a.map(|v| (255.0 - v) as f32), "uint8: 255 - v");
    assert_eq!(ib, b.map(|v| (-v - 1.0) as f32), "int16: -v - 1");
    let args = vec![Arg::Tensor(vec![1, 4], a.to_vec(), Dtype::U8), Arg::Tensor(vec![1, 4], b.to_vec(), Dtype::I16)];
    let pkg = package_of("invert_widths_pkg", &[&invert_widths::INFO]);
    let np = run_numpy_ranks(&pkg, "invert_widths", &[args], 1, "hardware").swap_remove(0);
    assert_close("uint8 invert numpy vs emulator", &np[0], &ua.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 0.0, 0.0);
    assert_close("int16 invert numpy vs emulator", &np[1], &ib.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 0.0, 0.0);
}

/// The new tokens as `op=` of `nisa.tensor_tensor` / `nisa.activation`,
/// `nl::r#mod` written raw.
#[nki_kernel]
pub fn tokens_in_isa_ops(x: Hbm, y: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let m = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    let c = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    let a = nl::load(x);
    let b = nl::load(y);
    let r = nl::ndarray([p, f], nl::float32);
    nisa::tensor_tensor(r, a, b, nl::r#mod);
    nl::store(m, r);
    let e = nl::ndarray([p, f], nl::float32);
    nisa::activation(e, nl::ceil, a);
    nl::store(c, e);
    (m, c)
}

#[test]
fn new_tokens_work_as_isa_op_arguments_in_the_emulator_and_under_numpy() {
    let (p, f) = (8, 16);
    let x: Vec<f64> = uniform(p * f, 91, -4.0, 4.0).iter().map(|v| (v * 4.0).floor() / 4.0).collect();
    let y: Vec<f64> = uniform(p * f, 92, 0.5, 2.0).iter().map(|v| (v * 4.0).floor() / 4.0).collect();
    let (m, c) = tokens_in_isa_ops::Call::new(&tensor(&[p, f], &x, Dtype::F32), &tensor(&[p, f], &y, Dtype::F32))
        .launch(&Launch::new().precision(Precision::Fp32))
        .unwrap();
    let (m, c) = (m.to_f32_vec(), c.to_f32_vec());
    assert_close("tensor_tensor op=nl.mod", &m, &x.iter().zip(&y).map(|(&a, &b)| py_mod(a, b)).collect::<Vec<_>>(), 0.0, 0.0);
    assert_close("activation op=nl.ceil", &c, &x.iter().map(|v| v.ceil()).collect::<Vec<_>>(), 0.0, 0.0);
    assert!(tokens_in_isa_ops::NKI_SOURCE.contains("op=nl.mod"), "{}", tokens_in_isa_ops::NKI_SOURCE);
    let args = vec![Arg::Tensor(vec![p, f], x, Dtype::F32), Arg::Tensor(vec![p, f], y, Dtype::F32)];
    let pkg = package_of("tokens_in_isa_ops_pkg", &[&tokens_in_isa_ops::INFO]);
    let np = run_numpy_ranks(&pkg, "tokens_in_isa_ops", &[args], 1, "fp32").swap_remove(0);
    for (label, (n, e)) in ["mod", "ceil"].iter().zip(np.iter().zip([&m, &c])) {
        assert_close(&format!("{label} numpy vs emulator"), n, &e.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 0.0, 0.0);
    }
}
