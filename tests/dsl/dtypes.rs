//! `nl::tfloat32` and `nl::float8_e8m0fnu` tiles in a kernel: values written
//! into them round as the dtypes do, in the emulator and under the NumPy
//! executor, checked against references written from the formats.

use crate::common::{Arg, assert_close, package_of, run_numpy_ranks, tensor, uniform};
use nki::prelude::*;

/// `x` `[P, F]` (float32) stored into a tfloat32 tile and into a float8_e8m0fnu
/// tile, each read back as float32.
#[nki_kernel]
pub fn narrow_copies(x: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let s = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(s, x);
    let t = nl::ndarray([p, f], nl::tfloat32);
    let e = nl::ndarray([p, f], nl::float8_e8m0fnu);
    nisa::tensor_copy(t, s);
    nisa::tensor_copy(e, s);
    let (tw, ew) = (nl::ndarray([p, f], nl::float32), nl::ndarray([p, f], nl::float32));
    nisa::tensor_copy(tw, t);
    nisa::tensor_copy(ew, e);
    let out_t = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    let out_e = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out_t, tw);
    nisa::dma_copy(out_e, ew);
    (out_t, out_e)
}

/// tfloat32: the nearest multiple of 2^(exponent - 10), ties to even (normal inputs).
fn tf32(v: f64) -> f64 {
    let e = v.abs().log2().floor();
    let q = 2f64.powf(e - 10.0);
    (v / q).round_ties_even() * q
}

/// float8_e8m0fnu: the power of two nearest on the linear scale, ties up (positive inputs).
fn e8m0(v: f64) -> f64 {
    let e = v.log2().floor();
    if v / 2f64.powf(e) >= 1.5 { 2f64.powf(e + 1.0) } else { 2f64.powf(e) }
}

#[test]
fn tfloat32_and_e8m0_tiles_round_like_their_formats_in_the_emulator_and_under_numpy() {
    let (p, f) = (16usize, 32usize);
    let mut x: Vec<f64> = uniform(p * f, 96, 1e-3, 100.0).iter().map(|&v| f64::from(v as f32)).collect();
    // Exact ties of both formats (positive values: e8m0 has no sign and no zero).
    x[0] = 1.0 + 2f64.powi(-11);
    x[1] = 1.5;
    x[2] = 3.0;
    let want_t: Vec<f64> = x.iter().map(|&v| tf32(v)).collect();
    let want_e: Vec<f64> = x.iter().map(|&v| e8m0(v)).collect();
    assert_eq!((want_t[0], want_e[1], want_e[2]), (1.0, 2.0, 4.0));
    let (t, e) = narrow_copies::Call::new(&tensor(&[p, f], &x, Dtype::F32)).launch(&Launch::new()).unwrap();
    assert_close("emulated tfloat32", &t.to_f32_vec(), &want_t, 0.0, 0.0);
    assert_close("emulated float8_e8m0fnu", &e.to_f32_vec(), &want_e, 0.0, 0.0);
    let pkg = package_of("narrow_pkg", &[&narrow_copies::INFO]);
    let outs = run_numpy_ranks(&pkg, "narrow_copies", &[vec![Arg::Tensor(vec![p, f], x, Dtype::F32)]], 1, "hardware").swap_remove(0);
    assert_close("numpy tfloat32", &outs[0], &want_t, 0.0, 0.0);
    assert_close("numpy float8_e8m0fnu", &outs[1], &want_e, 0.0, 0.0);
}

/// PE-transposes `x` (`[P, F]`) into a PSUM tile of `like`'s dtype: dtypes the
/// macro cannot see, so the emulator checks the spec's no-cast rule at run time.
#[nki_kernel]
pub fn transpose_into(x: Hbm, like: Hbm) {
    let [p, f] = x.shape();
    let t = nl::ndarray([p, f], x.dtype(), buffer = nl::sbuf);
    nisa::dma_copy(t, x);
    let acc = nl::ndarray([f, p], like.dtype(), buffer = nl::psum);
    nisa::nc_transpose(acc, t, engine = nisa::engine::tensor);
}

#[test]
fn a_pe_transpose_into_another_dtype_fails_at_run_time_naming_the_bound_variable() {
    let x = tensor(&[4, 8], &[1.0; 32], Dtype::Bf16);
    let line = include_str!("dtypes.rs").lines().position(|l| l.contains("nisa::nc_transpose(acc, t,")).unwrap() + 1;
    let e = transpose_into::Call::new(&x, &tensor(&[1, 1], &[0.0], Dtype::F32)).launch(&Launch::new()).unwrap_err();
    // The message the macro gives when it sees both dtypes (tests/ui/macro/pe_transpose_dtype.stderr),
    // naming the tile by its binding: the kernel passes no `name=`.
    let want = format!(
        "nisa.nc_transpose (tests/dsl/dtypes.rs:{line}): dst 'acc' is float32 but data is bfloat16; dst must have the dtype of data: the op does not cast"
    );
    assert_eq!(e.to_string(), want);
    assert_eq!(e.kind, nki::ErrorKind::Dtype);
    // Same dtypes transpose.
    transpose_into::Call::new(&x, &tensor(&[1, 1], &[0.0], Dtype::Bf16)).launch(&Launch::new()).unwrap();
}
