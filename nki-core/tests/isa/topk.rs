//! `topk` against its docstring: each group of 16 partitions holds a snake of
//! `n` bf16 values (element e at partition e % 16, column e / 16); every
//! partition of the group receives the K largest in ascending order and their
//! snake positions.

use crate::common::*;
use nki_core::isa::{self as nisa, NameOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision, Result};

/// Runs `topk` on a `(p, cols)` bf16 tile holding `x` (row-major) with K = `k`.
fn run(precision: Precision, x: &[f64], p: usize, cols: usize, n: i64, k: usize) -> Result<(Vec<f32>, Vec<f32>)> {
    launch(precision).run(|ctx| {
        let s = sbuf_with(ctx, &[p as i64, cols as i64], Dtype::Bf16, x)?;
        let v = alloc(ctx, &[p as i64, k as i64], Dtype::Bf16, Buffer::Sbuf)?;
        let i = alloc(ctx, &[p as i64, k as i64], Dtype::U32, Buffer::Sbuf)?;
        nisa::topk(ctx, &v, &i, &s, n, NameOpts::default())?;
        Ok((v.to_f32_vec(), i.to_f32_vec()))
    })
}

/// The reference: per group, the snake, its K largest (distinct values), ascending.
fn reference(x: &[f64], p: usize, cols: usize, n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut vals, mut idxs) = (Vec::new(), Vec::new());
    for g in 0..p / 16 {
        let snake: Vec<(f64, usize)> = (0..n).map(|e| (x[(g * 16 + e % 16) * cols + e / 16], e)).collect();
        let mut by_value = snake.clone();
        by_value.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        let mut top = by_value[..k].to_vec();
        top.reverse();
        for _ in 0..16 {
            vals.extend(top.iter().map(|t| t.0));
            idxs.extend(top.iter().map(|t| t.1 as f64));
        }
    }
    (vals, idxs)
}

#[test]
fn the_docs_example_finds_the_eight_largest_of_a_42_element_snake() {
    let (p, cols, n, k) = (32usize, 3usize, 42usize, 8usize);
    // Distinct bf16 values (multiples of 1/8 below 16), the snake's tail beyond n large.
    let mut pool: Vec<f64> = (0..p * cols).map(|i| (i as f64 * 37.0) % 128.0 / 8.0 - 8.0).collect();
    for g in 0..2 {
        for e in n..16 * cols {
            pool[(g * 16 + e % 16) * cols + e / 16] = 100.0;
        }
    }
    let (want_v, want_i) = reference(&pool, p, cols, n, k);
    assert!(want_v.iter().all(|&v| v < 100.0), "elements past n are not searched");
    for precision in [Precision::Fp32, Precision::Hardware] {
        let (v, i) = run(precision, &pool, p, cols, n as i64, k).unwrap();
        assert_close(&v, &want_v, 0.0, 0.0);
        assert_close(&i, &want_i, 0.0, 0.0);
    }
}

#[test]
fn k_of_n_over_four_groups_with_a_wide_snake() {
    let (p, cols, n, k) = (64usize, 40usize, 600usize, 37usize);
    // Distinct bf16 values: successive bf16 bit patterns, permuted, odd ones negated.
    let x: Vec<f64> = (0..p * cols)
        .map(|i| {
            let code = ((i * 1031) % (p * cols)) as u32;
            let v = f64::from(f32::from_bits((0x3C00 + code) << 16));
            if code % 2 == 1 { -v } else { v }
        })
        .collect();
    let distinct = |g: usize| {
        let mut s: Vec<f64> = (0..n).map(|e| x[(g * 16 + e % 16) * cols + e / 16]).collect();
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        s.windows(2).all(|w| w[0] != w[1])
    };
    assert!((0..4).all(distinct), "the test wants distinct snake values");
    let (want_v, want_i) = reference(&x, p, cols, n, k);
    let (v, i) = run(Precision::Hardware, &x, p, cols, n as i64, k).unwrap();
    assert_close(&v, &want_v, 0.0, 0.0);
    assert_close(&i, &want_i, 0.0, 0.0);
}

#[test]
fn ties_come_in_position_order() {
    // One group, n = 16: value 5 at snake positions 3, 7 and 12, the rest below.
    let mut x = vec![0.0; 16];
    for e in [3, 7, 12] {
        x[e] = 5.0;
    }
    x[9] = 4.0;
    let (v, i) = run(Precision::Fp32, &x, 16, 1, 16, 4).unwrap();
    assert_close(&v[..4], &[4.0, 5.0, 5.0, 5.0], 0.0, 0.0);
    assert_close(&i[..4], &[9.0, 3.0, 7.0, 12.0], 0.0, 0.0);
}

#[test]
fn run_time_errors_name_the_limit() {
    let x = vec![1.0; 32 * 2];
    assert_err(&expect_err(run(Precision::Fp32, &x, 32, 2, 7, 4)), ErrorKind::Constraint, &["nisa.topk", "n = 7", "8..=65535"]);
    assert_err(&expect_err(run(Precision::Fp32, &x, 32, 2, 8, 9)), ErrorKind::Constraint, &["K = 9", "at most n = 8"]);
    assert_err(&expect_err(run(Precision::Fp32, &x, 32, 2, 40, 4)), ErrorKind::Shape, &["n = 40 needs at least 3"]);
    let x = vec![1.0; 8 * 4];
    assert_err(&expect_err(run(Precision::Fp32, &x, 8, 4, 8, 4)), ErrorKind::Shape, &["multiple of 16"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let s = alloc(ctx, &[16, 4], Dtype::F32, Buffer::Sbuf)?;
        let v = alloc(ctx, &[16, 4], Dtype::Bf16, Buffer::Sbuf)?;
        let i = alloc(ctx, &[16, 4], Dtype::U32, Buffer::Sbuf)?;
        nisa::topk(ctx, &v, &i, &s, 16, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["src", "bfloat16 SBUF tile"]);
}
