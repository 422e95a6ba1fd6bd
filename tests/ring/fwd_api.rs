//! The typed `RingFwdConfig` API: the query-scaling contract (raw queries are
//! scaled for the causal kernel, pre-scaled ones are checked), per-rank inputs
//! built with `shard`, and run-time errors that name the parameter.

use crate::common;

use crate::common::attention::Problem;
use crate::common::ring_features::Inputs;
use crate::common::{assert_close, uniform};
use nki::attention::reference::Dims;
use nki::attention::ring_fwd::{Queries, RingDims, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{SeqLayout, shard, unshard, unshard_lse};
use nki::{Dtype, ErrorKind, Launch, Precision, Tensor};

const BH: usize = 2;
const ST: usize = 512;
const D: usize = 32;

/// The global problem: q, k and v `[1, BH, ST, D]`.
fn global() -> Inputs {
    Inputs::random(Dims { batch: 1, heads: BH, kv_heads: BH, seqlen: ST, head_dim: D }, 81, None)
}

fn tensor(x: &[f64]) -> Tensor {
    common::tensor(&[1, BH, ST, D], x, Dtype::F32)
}

/// Per-rank q (times `q_factor`), k (both d-major) and v.
fn shards(g: &Inputs, w: usize, layout: SeqLayout, q_factor: f64) -> (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>) {
    let q: Vec<f64> = g.q.iter().map(|x| x * q_factor).collect();
    (
        shard(&tensor(&q), w, layout, true).unwrap(),
        shard(&tensor(&g.k), w, layout, true).unwrap(),
        shard(&tensor(&g.v), w, layout, false).unwrap(),
    )
}

/// The float64 output and LSE.
fn reference(g: &Inputs, causal: bool, scale: f64) -> (Vec<f64>, Vec<f64>) {
    let r = Problem { scale, causal, ..Problem::new(BH, BH, ST, ST, D, &g.q, &g.k, &g.v) }.solve(true);
    let lse = r.max.iter().zip(&r.sum).map(|(m, s)| m + s.ln()).collect();
    (r.out, lse)
}

fn fp32(w: usize) -> Launch {
    Launch::new().ranks(w).precision(Precision::Fp32)
}

#[test]
fn raw_and_prescaled_queries_give_the_same_attention_in_both_masks() {
    let g = global();
    let (w, scale) = (4usize, 0.3);
    for (causal, layout) in [(true, SeqLayout::Striped), (true, SeqLayout::Contiguous), (false, SeqLayout::Contiguous)] {
        let cfg = RingFwdConfig::new(w as i64).causal(causal).striped(layout == SeqLayout::Striped).training(true).softmax_scale(scale);
        let (want_o, want_l) = reference(&g, causal, scale);
        let (q_raw, k, v) = shards(&g, w, layout, 1.0);
        let (q_pre, _, _) = shards(&g, w, layout, scale);
        for q in [Queries::Raw(&q_raw), Queries::Prescaled { q: &q_pre, scale }] {
            let outs = cfg.launch(&fp32(w), &RingFwdInputs { q, k: &k, v: &v, sinks: None, segment_ids: None, bias: None }).unwrap();
            let what = format!("causal={causal} {layout:?} {q:?}");
            assert_close(&what, &unshard(&outs.out, layout, false).unwrap().to_f32_vec(), &want_o, 1e-6, 1e-5);
            let lse = outs.lse.expect("training returns the LSE");
            assert_close(&what, &unshard_lse(&lse, layout).unwrap().to_f32_vec(), &want_l, 1e-6, 1e-5);
        }
    }
}

#[test]
fn queries_prescaled_by_another_factor_are_rejected() {
    let g = global();
    let (q, k, v) = shards(&g, 2, SeqLayout::Contiguous, 0.5);
    let cfg = RingFwdConfig::new(2).causal(true);
    let e = cfg
        .launch(
            &fp32(2),
            &RingFwdInputs { q: Queries::Prescaled { q: &q, scale: 0.5 }, k: &k, v: &v, sinks: None, segment_ids: None, bias: None },
        )
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Argument, "{e}");
    let default = 1.0 / (D as f64).sqrt();
    assert!(e.message.contains("pre-scaled by 0.5") && e.message.contains(&default.to_string()), "{e}");
}

#[test]
fn inputs_that_do_not_fit_the_ring_name_the_parameter() {
    let g = global();
    let (q, k, v) = shards(&g, 2, SeqLayout::Contiguous, 1.0);
    let cfg = RingFwdConfig::new(2);
    let inputs = RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: None, segment_ids: None, bias: None };
    let expect = |e: nki::NkiError, parts: &[&str]| {
        assert_eq!(e.kind, ErrorKind::Argument, "{e}");
        for p in parts {
            assert!(e.message.contains(p), "`{p}` not in: {e}");
        }
    };
    expect(cfg.launch(&fp32(3), &inputs).unwrap_err(), &["ranks = 3", "must have 2 ranks"]);
    expect(cfg.launch(&fp32(2), &RingFwdInputs { k: &k[..1], ..inputs }).unwrap_err(), &["k = 1 tensors", "one tensor per rank"]);
    let mut bad_k = k.clone();
    bad_k[1] = Tensor::zeros(&[1, BH, D, 128], Dtype::F32).unwrap();
    expect(
        cfg.launch(&fp32(2), &RingFwdInputs { k: &bad_k, ..inputs }).unwrap_err(),
        &["k[1]", "[1, 2, 32, 128]", "must be [1, 2, 32, 256]"],
    );
    let dims = RingDims { batch: 1, heads: BH as i64, seqlen: 128, head_dim: D as i64 };
    expect(cfg.dims(dims).launch(&fp32(2), &inputs).unwrap_err(), &["q", "the configuration's dims"]);
    // Rules derived from the tensors: 200 tokens per rank is not a multiple of 128.
    let odd_global = common::tensor(&[1, BH, 400, D], &uniform(BH * 400 * D, 1, 0.0, 1.0), Dtype::F32);
    let odd = shard(&odd_global, 2, SeqLayout::Contiguous, true).unwrap();
    let e = cfg
        .launch(&fp32(2), &RingFwdInputs { q: Queries::Raw(&odd), k: &odd, v: &odd, sinks: None, segment_ids: None, bias: None })
        .unwrap_err();
    expect(e, &["seqlen = 200", "multiple of 128"]);
    // Two rings of two: the launch needs four ranks.
    const GROUPS: &[&[i64]] = &[&[0, 2], &[1, 3]];
    expect(cfg.replica_groups(GROUPS).launch(&fp32(2), &inputs).unwrap_err(), &["must have 4 ranks (2 ring(s) of 2 workers)"]);
}
