//! Shared support for the nki-core integration tests: deterministic inputs,
//! tile helpers, comparisons against f64 references and a hang guard.
//!
//! Each test binary includes this module and uses a subset of it.
#![allow(dead_code)]

pub mod lcg;
pub mod xorwow;

pub use lcg::uniform;

use nki_core::nl::{self, NdarrayOpts, NlOp};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, NkiError, Precision, Result, Tensor};
use std::sync::mpsc;
use std::time::Duration;

/// Values `k / 2^bits` for integers `k` in `[lo * 2^bits, hi * 2^bits)`: dyadic
/// numbers whose sums and small products are exact in f32 and f64.
pub fn dyadic(n: usize, seed: u64, lo: f64, hi: f64, bits: i32) -> Vec<f64> {
    let q = 2f64.powi(bits);
    uniform(n, seed, lo, hi).into_iter().map(|v| (v * q).floor() / q).collect()
}

/// `values` as the f32 cells that hold them, widened back to f64.
pub fn f32_cells(values: &[f64]) -> Vec<f64> {
    values.iter().map(|&x| f64::from(x as f32)).collect()
}

/// The float64 meaning of an arithmetic ALU token, as its `nki.language`
/// docstring defines it (`x + y`, `x - y`, `x * y`, `max(x, y)`, `min(x, y)`).
pub fn alu(op: NlOp, x: f64, y: f64) -> f64 {
    match op {
        NlOp::Add => x + y,
        NlOp::Subtract => x - y,
        NlOp::Multiply => x * y,
        NlOp::Maximum => x.max(y),
        NlOp::Minimum => x.min(y),
        other => panic!("{other} is not an arithmetic token"),
    }
}

/// A launch with one program in the given precision.
pub fn launch(precision: Precision) -> Launch {
    Launch::new().precision(precision)
}

/// An on-chip (or HBM) tensor from `nl.ndarray`.
pub fn alloc(ctx: &Ctx, shape: &[i64], dtype: Dtype, buffer: Buffer) -> Result<Tensor> {
    nl::ndarray(ctx, shape, dtype, NdarrayOpts { buffer: Some(buffer), ..Default::default() })
}

/// A fresh SBUF tile holding `values` (row-major), rounded to `dtype`.
pub fn sbuf_with(ctx: &Ctx, shape: &[i64], dtype: Dtype, values: &[f64]) -> Result<Tensor> {
    let t = alloc(ctx, shape, dtype, Buffer::Sbuf)?;
    let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
    t.fill_from_f32(&v)?;
    Ok(t)
}

/// Runs `f` on one program (default precision) with `values` in a fresh fp32
/// SBUF tile of `shape`, and returns its result; an error fails the test.
pub fn on_tile<R: Send>(shape: &[i64], values: &[f64], f: impl Fn(&Ctx, &Tensor) -> Result<R> + Sync) -> R {
    Launch::new().run(|ctx| f(ctx, &sbuf_with(ctx, shape, Dtype::F32, values)?)).unwrap()
}

/// [`on_tile`] with one fp32 tile of `shape` per entry of `values`.
pub fn on_tiles<R: Send>(shape: &[i64], values: &[Vec<f64>], f: impl Fn(&Ctx, &[Tensor]) -> Result<R> + Sync) -> R {
    Launch::new()
        .run(|ctx| {
            let tiles = values.iter().map(|x| sbuf_with(ctx, shape, Dtype::F32, x)).collect::<Result<Vec<_>>>()?;
            f(ctx, &tiles)
        })
        .unwrap()
}

/// A shared-HBM input tensor holding `values`.
pub fn hbm(shape: &[usize], values: &[f64], dtype: Dtype) -> Tensor {
    let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
    Tensor::from_f32(shape, &v, dtype).expect("shape matches values")
}

/// `0, 1, 2, ...` as f64.
pub fn arange(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

/// `x` rounded to bfloat16 by the `half` crate (round to nearest even).
pub fn bf16(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

/// `x` rounded to float16 by the `half` crate (round to nearest even).
pub fn f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// Asserts `|got - want| <= atol + rtol * |want|` element-wise.
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "length differs");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        assert!((g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan()), "element {i}: got {g}, want {w}");
    }
}

/// Asserts that two value lists are bit-identical (NaNs compare by bits too).
#[track_caller]
pub fn assert_bits(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() == w.to_bits(), "element {i}: got {g:e} ({:#010x}), want {w:e} ({:#010x})", g.to_bits(), w.to_bits());
    }
}

/// The error of a result that must fail.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: Result<T>) -> NkiError {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e,
    }
}

/// Asserts that `e` is of `kind` and that its text contains every one of `parts`.
#[track_caller]
pub fn assert_err(e: &NkiError, kind: ErrorKind, parts: &[&str]) {
    assert_eq!(e.kind, kind, "wrong kind for: {e}");
    let text = e.to_string();
    for p in parts {
        assert!(text.contains(p), "{p:?} missing from: {text}");
    }
}

/// Runs `f` on another thread and fails the test if it takes longer than `secs`.
pub fn with_timeout<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("did not finish within {secs} s (hang)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the guarded closure panicked"),
    }
}
