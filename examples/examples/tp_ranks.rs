//! Launching a multi-rank kernel from Rust, each rank with its own inputs.
//!
//! [`tp_matmul`](nki_examples::tp_matmul::tp_matmul) computes `y = (x · W1) · W2`
//! over a group of 4 ranks: rank `r` holds its slices of `xᵀ`, `W1` and `W2` and
//! returns its rows of `y`. The launch runs the 4 ranks at once
//! (`Launch::new().ranks(4)`); the closure passed to `run_ranks` runs once per
//! rank and picks that rank's inputs by `ctx.rank()`; `run_ranks` returns each
//! rank's result in rank order. The example checks the assembled `y` against a
//! float64 product and prints the largest error.
//!
//! Run it with `cargo run --release -p nki-examples --example tp_ranks`.

extern crate nki_core as nki;

use nki::{Dtype, Launch, Precision, Tensor};
use nki_examples::tp_matmul::tp_matmul;

/// Ranks in the kernel's replica group.
const RANKS: usize = 4;
/// Input features.
const K: usize = 128;
/// Hidden features (the kernel's matmuls need `H / RANKS` a multiple of 128).
const H: usize = 512;
/// Rows (a multiple of 512 and of `RANKS` x 128).
const M: usize = 512;
/// Output features (a multiple of 512).
const N: usize = 512;

/// A deterministic value in [-0.5, 0.5) for element `i` of matrix `seed`.
fn value(seed: usize, i: usize) -> f64 {
    ((i * 7919 + seed * 104_729) % 1000) as f64 / 1000.0 - 0.5
}

/// A `rows x cols` row-major matrix of [`value`]s.
fn matrix(seed: usize, rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols).map(|i| value(seed, i)).collect()
}

/// Rows `lo..hi` and columns `c0..c1` of the row-major `m` with `cols` columns.
fn block(m: &[f64], cols: usize, (lo, hi): (usize, usize), (c0, c1): (usize, usize)) -> Vec<f64> {
    (lo..hi).flat_map(|i| m[i * cols + c0..i * cols + c1].iter().copied()).collect()
}

/// `a` (`n x k`) times `b` (`k x m`) in float64.
fn product(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    (0..n * m).map(|o| (0..k).map(|j| a[o / m * k + j] * b[j * m + o % m]).sum()).collect()
}

fn tensor(shape: [usize; 2], v: &[f64]) -> nki::Result<Tensor> {
    Tensor::from_f32(&shape, &v.iter().map(|&x| x as f32).collect::<Vec<_>>(), Dtype::F32)
}

/// Runs the 4-rank launch and returns the largest absolute difference between
/// the ranks' rows of `y` and the float64 product.
pub fn run() -> nki::Result<f64> {
    let x_t = matrix(1, K, M); // xᵀ: [K, M]
    let w1 = matrix(2, K, H);
    let w2 = matrix(3, H, N);
    let (k, h) = (K / RANKS, H / RANKS);
    // One set of inputs per rank: its rows of xᵀ, columns of W1, rows of W2.
    let inputs: Vec<[Tensor; 3]> = (0..RANKS)
        .map(|r| {
            Ok([
                tensor([k, M], &block(&x_t, M, (r * k, (r + 1) * k), (0, M)))?,
                tensor([K, h], &block(&w1, H, (0, K), (r * h, (r + 1) * h)))?,
                tensor([h, N], &block(&w2, N, (r * h, (r + 1) * h), (0, N)))?,
            ])
        })
        .collect::<nki::Result<_>>()?;
    let ys: Vec<Tensor> = Launch::new().ranks(RANKS).precision(Precision::Fp32).run_ranks(|ctx| {
        let [x_t, w1, w2] = &inputs[ctx.rank()];
        tp_matmul::Call::new(x_t, w1, w2).run(ctx)
    })?;
    // y = x · W1 · W2, with x = (xᵀ)ᵀ.
    let x = (0..M * K).map(|i| x_t[(i % K) * M + i / K]).collect::<Vec<_>>();
    let y = product(&product(&x, &w1, M, K, H), &w2, M, H, N);
    let rows = M / RANKS;
    let mut worst = 0f64;
    for (r, got) in ys.iter().enumerate() {
        assert_eq!(got.shape(), [rows, N], "rank {r}'s rows of y");
        let want = &y[r * rows * N..(r + 1) * rows * N];
        for (g, w) in got.to_f32_vec().iter().zip(want) {
            worst = worst.max((f64::from(*g) - w).abs());
        }
    }
    Ok(worst)
}

pub fn main() -> nki::Result<()> {
    let worst = run()?;
    println!("{RANKS} ranks: y = x · W1 · W2 ({M} x {N}) matches float64 within {worst:.2e}");
    Ok(())
}
