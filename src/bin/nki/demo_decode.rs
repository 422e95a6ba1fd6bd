//! The decode part of `nki demo`: a prompt prefilled with `attention_cte`, then
//! one token generated with `attention_tkg` over the prompt's KV cache, both
//! checked against float64 causal attention over the prompt plus the new token
//! (the decode output must equal that attention's last row).

use nki::attention::cte::{CteConfig, CteInputs};
use nki::attention::reference::{self, Dims, Features};
use nki::attention::tkg::{TkgConfig, TkgDims, TkgInputs};
use nki::{Dtype, Launch, NkiError, Precision, Tensor};
use std::time::Instant;

/// Sequences, query heads on their one KV head (GQA 8:1), prompt tokens, head dim
/// and KV-cache capacity of the decode demo.
pub const BATCH: usize = 2;
pub const HEADS: usize = 8;
pub const PROMPT: usize = 1023;
pub const D: usize = 128;
const CAPACITY: usize = 2048;

/// One checked kernel run: its error, the bound, seconds and flops.
pub struct Checked {
    pub err: f64,
    pub bound: f64,
    pub secs: f64,
    pub flops: f64,
}

/// The prefill and the decode step, checked.
pub struct DecodeRun {
    pub prefill: Checked,
    pub decode: Checked,
}

fn tensor(shape: &[usize], x: &[f64], dtype: Dtype) -> Result<Tensor, NkiError> {
    Tensor::from_f32(shape, &x.iter().map(|&v| v as f32).collect::<Vec<_>>(), dtype)
}

/// `max |got - want|` against `atol + rtol · max |want|` of the precision mode.
fn check(got: &[f32], want: &[f64], precision: Precision, secs: f64, flops: f64) -> Checked {
    let err = got.iter().zip(want).map(|(&g, &w)| if g.is_finite() { (f64::from(g) - w).abs() } else { f64::INFINITY }).fold(0.0, f64::max);
    let max = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let bound = if precision == Precision::Fp32 { 1e-6 + 1e-5 * max } else { 1e-5 + 2e-2 * max };
    Checked { err, bound, secs, flops }
}

/// Runs the prefill and one decode step on `q` `[BATCH, HEADS, PROMPT + 1, D]`
/// and `k`, `v` `[BATCH, 1, PROMPT + 1, D]` (already rounded to `dtype`).
pub fn run(q: &[f64], k: &[f64], v: &[f64], dtype: Dtype, precision: Precision) -> Result<DecodeRun, NkiError> {
    let (s, scale) = (PROMPT + 1, 1.0 / (D as f64).sqrt());
    let dims = Dims { batch: BATCH, heads: HEADS, kv_heads: 1, seqlen: s, head_dim: D };
    let want = reference::attend(q, k, v, &dims, scale, &Features::masked(true)).out;
    let launch = Launch::new().lnc(2).precision(precision);

    // Prefill: the prompt's tokens, `(BATCH·HEADS, PROMPT, D)` queries over `BATCH` KV batches.
    let rows =
        |x: &[f64], n: usize| -> Vec<f64> { (0..n * PROMPT * D).map(|i| x[(i / (PROMPT * D) * s + i / D % PROMPT) * D + i % D]).collect() };
    let q_p = rows(q, BATCH * HEADS);
    let k_p: Vec<f64> = (0..BATCH * D * PROMPT).map(|i| k[((i / (D * PROMPT)) * s + i % PROMPT) * D + i / PROMPT % D]).collect();
    let v_p = rows(v, BATCH);
    let (qt, kt, vt) = (
        tensor(&[BATCH * HEADS, PROMPT, D], &q_p, dtype)?,
        tensor(&[BATCH, D, PROMPT], &k_p, dtype)?,
        tensor(&[BATCH, PROMPT, D], &v_p, dtype)?,
    );
    let start = Instant::now();
    let out = CteConfig::new().scale(scale).launch(&launch, &CteInputs::new(&qt, &kt, &vt))?.out;
    let secs = start.elapsed().as_secs_f64();
    let want_p = rows(&want, BATCH * HEADS);
    let prefill = check(&out.to_f32_vec(), &want_p, precision, secs, 2.0 * (BATCH * HEADS * PROMPT * PROMPT * D) as f64);

    // Decode: token PROMPT of every sequence over the cache of the prompt's keys and values.
    // Element e of the new token of head n (queries pre-scaled, as the library expects).
    let last = |x: &[f64], n: usize, e: usize| x[(n * s + PROMPT) * D + e];
    let q_d: Vec<f64> = (0..D * BATCH * HEADS).map(|i| scale * last(q, i % (BATCH * HEADS), i / (BATCH * HEADS))).collect();
    let k_a: Vec<f64> = (0..D * BATCH).map(|i| last(k, i % BATCH, i / BATCH)).collect();
    let v_a: Vec<f64> = (0..BATCH * D).map(|i| last(v, i / D, i % D)).collect();
    let mut k_prior = vec![0.0; BATCH * D * CAPACITY];
    let mut v_prior = vec![0.0; BATCH * CAPACITY * D];
    for b in 0..BATCH {
        for j in 0..PROMPT {
            for e in 0..D {
                k_prior[(b * D + e) * CAPACITY + j] = k[(b * s + j) * D + e];
                v_prior[(b * CAPACITY + j) * D + e] = v[(b * s + j) * D + e];
            }
        }
    }
    let mask = vec![1.0; s * BATCH * HEADS];
    let t = [
        tensor(&[D, BATCH * HEADS], &q_d, dtype)?,
        tensor(&[D, BATCH], &k_a, dtype)?,
        tensor(&[BATCH, 1, 1, D], &v_a, dtype)?,
        tensor(&[BATCH, 1, D, CAPACITY], &k_prior, dtype)?,
        tensor(&[BATCH, 1, CAPACITY, D], &v_prior, dtype)?,
        tensor(&[s, BATCH, HEADS, 1], &mask, Dtype::U8)?,
    ];
    let cfg = TkgConfig::new(TkgDims {
        bs: BATCH as i64,
        q_head: HEADS as i64,
        s_active: 1,
        curr_sprior: s as i64,
        full_sprior: CAPACITY as i64,
        d_head: D as i64,
    });
    let inputs = TkgInputs::new(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]);
    let start = Instant::now();
    let (out, _) = cfg.launch(&launch, &inputs)?;
    let secs = start.elapsed().as_secs_f64();
    // out is (BATCH, HEADS, D, 1): row PROMPT of each head of the reference.
    let want_d: Vec<f64> = (0..BATCH * HEADS * D).map(|i| want[((i / D) * s + PROMPT) * D + i % D]).collect();
    let decode = check(&out.to_f32_vec(), &want_d, precision, secs, 4.0 * (BATCH * HEADS * s * D) as f64);
    Ok(DecodeRun { prefill, decode })
}
