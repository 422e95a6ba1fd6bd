//! `attention_tkg` numerics: the emulated DSL kernel (through the typed
//! `TkgConfig` API) against the independent float64 decode reference
//! (`nki_attention::reference_tkg`) over the library's shape ranges — one token
//! and one head up to a 16384-position cache streamed in two flash-attention
//! tiles, GQA ratios 1 to 32, speculative decoding, both `k_prior` layouts, sinks,
//! masks with holes, extra cache batches — in both precision modes; and the
//! run-time errors naming the parameter.
//!
//! Tolerances: `Precision::Fp32` must hold `max|a-b| <= 1e-5 max|ref| + 1e-6`;
//! `Precision::Hardware` the library test's `1e-5 + 2e-2 max|ref|` (inputs
//! rounded to their dtype before the reference).

mod common;

use common::{as_dtype, assert_close, seed_of, tensor, uniform};
use nki::attention::reference_tkg::{Inputs, Shape, decode};
use nki::attention::tkg::{TkgConfig, TkgDims, TkgInputs};
use nki::{Dtype, Launch, Precision, Tensor};

const FP32_RTOL: f64 = 1e-5;
const FP32_ATOL: f64 = 1e-6;
const HW_RTOL: f64 = 2e-2;
const HW_ATOL: f64 = 1e-5;

/// One decode step's data, in the kernel's layouts, as f64.
pub struct Data {
    pub shape: Shape,
    pub q: Vec<f64>,
    pub k_active: Vec<f64>,
    pub v_active: Vec<f64>,
    pub k_prior: Vec<f64>,
    pub v_prior: Vec<f64>,
    pub mask: Vec<f64>,
    pub sink: Option<Vec<f64>>,
}

/// Random data for `s`: queries pre-scaled by `1/sqrt(d)`; batch `b` uses the
/// first `used_b` cache positions (a different length per batch) and sees the
/// active tokens causally; `holes` also hides every 7th visible prior key.
fn data(name: &str, s: Shape, sink: bool, holes: bool, dtype: Dtype) -> Data {
    let seed = seed_of(name);
    let scale = 1.0 / (s.d as f64).sqrt();
    let n = s.bs * s.q_head * s.s_active;
    let q: Vec<f64> = uniform(s.d * n, seed, -2.0, 2.0).iter().map(|x| x * scale).collect();
    let prior_len = s.cache_bs * s.full_sprior * s.d;
    let split = s.curr_sprior - s.s_active;
    let mut mask = vec![0.0; s.curr_sprior * n];
    for b in 0..s.bs {
        let used = split - (b * 37) % (split / 2 + 1);
        for h in 0..s.q_head {
            for t in 0..s.s_active {
                for j in 0..s.curr_sprior {
                    let visible = if j < split { j < used && !(holes && j % 7 == 3) } else { j - split <= t };
                    mask[((j * s.bs + b) * s.q_head + h) * s.s_active + t] = f64::from(u8::from(visible));
                }
            }
        }
    }
    Data {
        shape: s,
        q: as_dtype(&q, dtype),
        k_active: as_dtype(&uniform(s.d * s.bs * s.s_active, seed + 1, -1.0, 1.0), dtype),
        v_active: as_dtype(&uniform(s.bs * s.s_active * s.d, seed + 2, -1.0, 1.0), dtype),
        k_prior: as_dtype(&uniform(prior_len, seed + 3, -1.0, 1.0), dtype),
        v_prior: as_dtype(&uniform(prior_len, seed + 4, -1.0, 1.0), dtype),
        mask,
        sink: sink.then(|| uniform(s.q_head, seed + 5, -1.0, 3.0)),
    }
}

/// The kernel's tensors for `x`.
struct Tensors {
    q: Tensor,
    k_active: Tensor,
    v_active: Tensor,
    k_prior: Tensor,
    v_prior: Tensor,
    mask: Tensor,
    sink: Option<Tensor>,
}

fn tensors(x: &Data, tp_k_prior: bool, dtype: Dtype) -> Tensors {
    let s = x.shape;
    let n = s.bs * s.q_head * s.s_active;
    let k_prior_shape = if tp_k_prior { [s.cache_bs, 1, s.full_sprior, s.d] } else { [s.cache_bs, 1, s.d, s.full_sprior] };
    Tensors {
        q: tensor(&[s.d, n], &x.q, dtype),
        k_active: tensor(&[s.d, s.bs * s.s_active], &x.k_active, dtype),
        v_active: tensor(&[s.bs, 1, s.s_active, s.d], &x.v_active, dtype),
        k_prior: tensor(&k_prior_shape, &x.k_prior, dtype),
        v_prior: tensor(&[s.cache_bs, 1, s.full_sprior, s.d], &x.v_prior, dtype),
        mask: tensor(&[s.curr_sprior, s.bs, s.q_head, s.s_active], &x.mask, Dtype::U8),
        sink: x.sink.as_ref().map(|v| tensor(&[s.q_head, 1], v, Dtype::F32)),
    }
}

fn config(s: Shape, tp_k_prior: bool, sink: bool) -> TkgConfig {
    let i = |v: usize| v as i64;
    let dims = TkgDims {
        bs: i(s.bs),
        q_head: i(s.q_head),
        s_active: i(s.s_active),
        curr_sprior: i(s.curr_sprior),
        full_sprior: i(s.full_sprior),
        d_head: i(s.d),
    };
    TkgConfig::new(dims).tp_k_prior(tp_k_prior).sink(sink)
}

fn reference(x: &Data, tp_k_prior: bool) -> Vec<f64> {
    let inputs = Inputs {
        q: &x.q,
        k_active: &x.k_active,
        v_active: &x.v_active,
        k_prior: &x.k_prior,
        v_prior: &x.v_prior,
        mask: &x.mask,
        sink: x.sink.as_deref(),
        tp_k_prior,
    };
    decode(&inputs, x.shape)
}

/// Runs one case in both precision modes (bf16 data in hardware mode) and LNC 2.
fn check(name: &str, s: Shape, tp_k_prior: bool, sink: bool, holes: bool) {
    for (precision, dtype, atol, rtol) in
        [(Precision::Fp32, Dtype::F32, FP32_ATOL, FP32_RTOL), (Precision::Hardware, Dtype::Bf16, HW_ATOL, HW_RTOL)]
    {
        let x = data(name, s, sink, holes, dtype);
        let t = tensors(&x, tp_k_prior, dtype);
        let inputs = TkgInputs {
            q: &t.q,
            k_active: &t.k_active,
            v_active: &t.v_active,
            k_prior: &t.k_prior,
            v_prior: &t.v_prior,
            mask: &t.mask,
            sink: t.sink.as_ref(),
        };
        let out = config(s, tp_k_prior, sink).launch(&Launch::new().lnc(2).precision(precision), &inputs).expect("attention_tkg runs");
        assert_eq!(out.shape(), &[s.bs, s.q_head, s.d, s.s_active]);
        assert_eq!(out.dtype(), dtype, "the output has q's dtype");
        assert_close(&format!("{name} {precision:?}"), &out.to_f32_vec(), &reference(&x, tp_k_prior), atol, rtol);
    }
}

const fn shape(bs: usize, q_head: usize, s_active: usize, curr_sprior: usize, full_sprior: usize, d: usize) -> Shape {
    Shape { bs, q_head, s_active, curr_sprior, full_sprior, d, cache_bs: bs }
}

#[test]
fn smallest_one_token_one_head_one_tile() {
    check("smallest", shape(1, 1, 1, 128, 128, 16), false, false, false);
}

#[test]
fn typical_decode_gqa_8_and_both_k_prior_layouts() {
    let s = shape(4, 8, 1, 2048, 4096, 128);
    check("typical", s, false, false, false);
    check("typical tp_k_prior", s, true, false, true);
}

#[test]
fn speculative_tokens_sinks_holes_and_spare_cache_batches() {
    check("speculative", shape(3, 4, 4, 1024, 1536, 64), false, true, true);
    check("spare cache batch", Shape { cache_bs: 3, ..shape(2, 2, 3, 640, 640, 32) }, true, true, false);
}

#[test]
fn gqa_ratios_from_1_to_32() {
    for (q_head, s_active) in [(1, 2), (4, 1), (16, 2), (32, 4)] {
        check(&format!("gqa {q_head}"), shape(2, q_head, s_active, 512, 512, 64), false, q_head == 16, q_head == 4);
    }
}

#[test]
fn largest_cache_streams_two_flash_attention_tiles() {
    // 16384 positions: two 8192-key tiles with the running max and sum between them.
    check("largest", shape(2, 8, 2, 16384, 16384, 128), true, true, true);
}
