//! Values a helper returns flow into other helpers like any other value: a tile
//! returned by one helper is passed by reference to another, in and out of loops,
//! and an integer a helper returns is passed by value, also straight from the call;
//! a returned tile is an operand of the ops like any tile.

use crate::common;

use nki::prelude::*;

/// Loads the first 128 rows of `x` into an fp32 tile.
#[nki_helper]
fn load_rows(x: Hbm) -> Sbuf {
    let t = nl::ndarray([128, 64], nl::float32);
    nisa::dma_copy(t, x[s![0..128, ..]]);
    t
}

/// `acc += t`.
#[nki_helper]
fn add_into(acc: Sbuf, t: Sbuf) {
    nisa::tensor_tensor(acc, acc, t, nl::add);
}

/// The number of times to add.
#[nki_helper]
fn times(n: i64) -> i64 {
    n + 1
}

/// `acc += t * k` for a count `k` another helper computed.
#[nki_helper]
fn add_times(acc: Sbuf, t: Sbuf, k: i64) {
    for _ in 0..k {
        add_into(acc, t);
    }
}

/// `(2 + 3) * x` over its first 128 rows, through helper results only.
#[nki_kernel]
pub fn helper_results(x: Hbm) -> Hbm {
    let out = nl::ndarray([128, 64], x.dtype(), buffer = nl::shared_hbm);
    let acc = nl::ndarray([128, 64], nl::float32);
    nisa::memset(acc, 0.0);
    let tile = load_rows(x);
    for _ in 0..2 {
        add_into(acc, tile);
    }
    let k = times(2);
    add_times(acc, tile, k);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn helper_results_pass_to_helpers() {
    let xs: Vec<f32> = (0..128 * 64).map(|i| (i % 7) as f32 - 3.0).collect();
    let x = Tensor::from_f32(&[128, 64], &xs, Dtype::F32).unwrap();
    let y = helper_results::Call::new(&x).launch(&Launch::new()).unwrap();
    let want: Vec<f32> = xs.iter().map(|v| 5.0 * v).collect();
    assert_eq!(y.to_f32_vec(), want);
    assert!(helper_results::NKI_SOURCE.contains("add_times(acc, tile, k)"), "{}", helper_results::NKI_SOURCE);
}

/// `x + x` through a helper's result passed straight into another helper.
#[nki_kernel]
pub fn nested_helper_result(x: Hbm) -> Hbm {
    let out = nl::ndarray([128, 64], x.dtype(), buffer = nl::shared_hbm);
    let acc = nl::ndarray([128, 64], nl::float32);
    nisa::memset(acc, 0.0);
    add_times(acc, load_rows(x), times(1));
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn helper_results_pass_straight_into_helpers() {
    let xs: Vec<f32> = (0..128 * 64).map(|i| (i % 5) as f32).collect();
    let x = Tensor::from_f32(&[128, 64], &xs, Dtype::F32).unwrap();
    let y = nested_helper_result::Call::new(&x).launch(&Launch::new()).unwrap();
    assert_eq!(y.to_f32_vec(), xs.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
}

/// The first column of `t`, doubled: a `[128, 1]` tile.
#[nki_helper]
fn doubled_column(t: Sbuf) -> Sbuf {
    let c = nl::ndarray([128, 1], nl::float32);
    nisa::tensor_scalar(c, t[s![.., 0..1]], nl::multiply, 2.0);
    c
}

/// `(x + 2 * x[:, 0]) + x` over the first 128 rows: helper results as
/// `nl::add`'s operand and as a per-partition `tensor_scalar` operand.
#[nki_kernel]
pub fn helper_operands(x: Hbm) -> Hbm {
    let t = load_rows(x);
    let plus = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_scalar(plus, t, nl::add, doubled_column(t));
    let sum = nl::add(plus, load_rows(x)[s![.., 0..64]]);
    let out = nl::ndarray([128, 64], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, sum);
    out
}

#[test]
fn helper_results_are_operands() {
    let xs: Vec<f32> = (0..128 * 64).map(|i| (i % 11) as f32 - 5.0).collect();
    // x + 2 * x[p, 0], plus x again.
    let want: Vec<f32> = xs.iter().enumerate().map(|(i, v)| v + 2.0 * xs[i / 64 * 64] + v).collect();
    let x = Tensor::from_f32(&[128, 64], &xs, Dtype::F32).unwrap();
    let y = helper_operands::Call::new(&x).launch(&Launch::new()).unwrap();
    assert_eq!(y.to_f32_vec(), want, "emulated");
    let pkg = common::package_of("helper_operands_pkg", &[&helper_operands::INFO, &doubled_column::INFO, &load_rows::INFO]);
    let args = vec![vec![common::Arg::Tensor(vec![128, 64], xs.iter().map(|&v| f64::from(v)).collect(), Dtype::F32)]];
    let np = common::run_numpy_ranks(&pkg, "helper_operands", &args, 1, "fp32").swap_remove(0);
    assert_eq!(np[0], want, "numpy");
    assert!(helper_operands::NKI_SOURCE.contains("operand0=doubled_column(t)"), "{}", helper_operands::NKI_SOURCE);
}

/// `(t, 3 t)` for a tile `t`: a helper returning two tiles.
#[nki_helper]
fn with_tripled(t: Sbuf) -> (Sbuf, Sbuf) {
    let three = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_scalar(three, t, nl::multiply, 3.0);
    (t, three)
}

/// `x + bias` when a bias is given, else a copy of `x`.
#[nki_helper]
fn plus_optional(x: Sbuf, bias: Option<Sbuf>) -> Sbuf {
    let out = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_copy(out, x);
    if let Some(b) = bias {
        nisa::tensor_tensor(out, out, b, nl::add);
    }
    out
}

/// Optional tiles a helper made: `Some(part of a helper's result)`,
/// `Some(helper call)` and an `if` choosing between `Some(helper call)` and
/// `None`, each passed to a helper's `Option` parameter. With `twice`:
/// `x + 3x + x + 3x = 8x`; without: `x + 3x + x = 5x`.
#[nki_kernel]
pub fn optional_helper_tiles(x: Hbm, twice: bool) -> Hbm {
    let (t, three) = with_tripled(load_rows(x));
    let a = plus_optional(t, Some(three));
    let b = plus_optional(a, Some(load_rows(x)));
    let c = plus_optional(b, if twice { Some(with_tripled(t).1) } else { None });
    let out = nl::ndarray([128, 64], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, c);
    out
}

#[test]
fn helper_results_pass_as_optional_tiles() {
    let xs: Vec<f32> = (0..128 * 64).map(|i| (i % 9) as f32 - 4.0).collect();
    let x = Tensor::from_f32(&[128, 64], &xs, Dtype::F32).unwrap();
    for (twice, k) in [(true, 8.0), (false, 5.0)] {
        let want: Vec<f32> = xs.iter().map(|v| k * v).collect();
        let y = optional_helper_tiles::Call::new(&x, twice).launch(&Launch::new()).unwrap();
        assert_eq!(y.to_f32_vec(), want, "emulated, twice = {twice}");
        let pkg = common::package_of(
            "optional_helper_tiles_pkg",
            &[&optional_helper_tiles::INFO, &with_tripled::INFO, &plus_optional::INFO, &load_rows::INFO],
        );
        let args = vec![vec![
            common::Arg::Tensor(vec![128, 64], xs.iter().map(|&v| f64::from(v)).collect(), Dtype::F32),
            common::Arg::Bool(twice),
        ]];
        let np = common::run_numpy_ranks(&pkg, "optional_helper_tiles", &args, 1, "fp32").swap_remove(0);
        assert_eq!(np[0], want, "numpy, twice = {twice}");
    }
}

/// How many times to add, as a trailing `if … else` (the helper's result).
#[nki_helper]
fn times_for(twice: bool) -> i64 {
    if twice { 2 } else { 1 }
}

/// `x` or `2x` over its first 128 rows, the count from a helper's trailing `if`.
#[nki_kernel]
pub fn tail_if_helper(x: Hbm, twice: bool) -> Hbm {
    let out = nl::ndarray([128, 64], x.dtype(), buffer = nl::shared_hbm);
    let acc = nl::ndarray([128, 64], nl::float32);
    nisa::memset(acc, 0.0);
    add_times(acc, load_rows(x), times_for(twice));
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn a_trailing_if_else_is_the_helpers_result() {
    let xs: Vec<f32> = (0..128 * 64).map(|i| (i % 9) as f32).collect();
    let x = Tensor::from_f32(&[128, 64], &xs, Dtype::F32).unwrap();
    for (twice, k) in [(false, 1.0), (true, 2.0)] {
        let y = tail_if_helper::Call::new(&x, twice).launch(&Launch::new()).unwrap().to_f32_vec();
        assert_eq!(y, xs.iter().map(|v| k * v).collect::<Vec<_>>(), "twice = {twice}");
    }
    // The helper returns Python's conditional expression.
    let pkg = nki::emit::Package::new(&[&tail_if_helper::INFO]).unwrap();
    assert!(
        pkg.files().values().any(|py| py.contains("(the helper's result).\"\"\"\n    return 2 if twice else 1\n")),
        "{:?}",
        pkg.files()
    );
}

/// Half of `n`, as a float.
#[nki_helper]
fn half(n: i64) -> f64 {
    (n as f64) * 0.5
}

/// `2n·(n + 1.5)·x` over its first 128 rows: helper results (an int and a
/// float) in arithmetic with ints and floats, unannotated, as in Python.
#[nki_kernel]
pub fn helper_result_arithmetic(x: Hbm, n: i64) -> Hbm {
    let out = nl::ndarray([128, 64], x.dtype(), buffer = nl::shared_hbm);
    let acc = nl::ndarray([128, 64], nl::float32);
    nisa::memset(acc, 0.0);
    let k = (times(n) - 1) * 2;
    add_times(acc, load_rows(x), k);
    let scale = 1.5 * times(n) - half(n);
    nisa::tensor_scalar(acc, acc, nl::multiply, scale);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn helper_results_take_python_arithmetic_with_ints_and_floats() {
    let xs: Vec<f32> = (0..128 * 64).map(|i| (i % 7) as f32 - 3.0).collect();
    let x = Tensor::from_f32(&[128, 64], &xs, Dtype::F32).unwrap();
    for n in [1, 2] {
        let y = helper_result_arithmetic::Call::new(&x, n).launch(&Launch::new()).unwrap().to_f32_vec();
        let k = 2.0 * n as f32 * (n as f32 + 1.5);
        assert_eq!(y, xs.iter().map(|v| k * v).collect::<Vec<_>>(), "n = {n}");
    }
}
