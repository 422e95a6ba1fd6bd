//! The remaining `nki.language` element-wise tile functions (rounding, `tan`,
//! the activation derivatives, logical and bitwise ops, remainders), emulated
//! against float64 / exact integer references of their documented meaning in
//! both precision models, and run under the NumPy executor.

mod common;

use common::{Arg, as_dtype, assert_close, package_of, run_numpy_ranks, tensor, uniform};
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
pub fn more_elementwise(x: Hbm, y: Hbm, z: Hbm, i: Hbm, s: Hbm) -> (Hbm, Hbm) {
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

#[test]
fn derivative_references_agree_with_central_differences_of_their_functions() {
    let h = 1e-5;
    let pairs: [(&str, fn(f64) -> f64, fn(f64) -> f64); 4] = [
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
