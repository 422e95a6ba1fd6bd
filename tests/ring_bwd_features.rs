//! `ring_attention_spmd_bwd`'s features past the NKI library's — grouped-query
//! K/V (dK and dV with `h_kv` heads, summed over each group) and sinks (`dsinks`)
//! — through the typed API, against the float64 gradients of
//! `nki_attention::reference` on the unsharded tensors (O and the LSE from the
//! reference forward, as the kernel receives them).
//!
//! * numerics: GQA 2:1, 4:1 (MQA with 4 heads) and 8:1, sinks alone and with GQA;
//!   W ∈ {1, 2, 3, 4, 8}; contiguous × {causal, non-causal}, striped × causal;
//!   LNC 1 and 2. `fp32`: `max|a-b| <= 1e-4·max|ref| + 1e-6` (today's ring bwd
//!   bound) on dQ, dK, dV and dsinks; `hardware` (bf16 inputs, the reference on
//!   the rounded inputs): `<= 1e-2 + 1e-2·max|ref|`;
//! * the reference gradients themselves are checked by finite differences in
//!   `nki_attention::reference`;
//! * the sink gradient of the whole sequence is the same for every W;
//! * errors: kv_heads that do not divide the heads are refused naming the parameter.

mod common;

use common::{as_dtype, assert_close, uniform};
use nki::attention::reference::{Dims, Features, attend, attend_backward};
use nki::attention::ring_bwd::{RingBwdConfig, RingBwdInputs, RingBwdOutputs};
use nki::attention::shard::{SeqLayout, shard, shard_lse, unshard};
use nki::{Dtype, Launch, Precision, Tensor};

/// One global problem: `q`, `dy` `[b, h, S, d]`, `k`, `v` `[b, h_kv, S, d]`.
struct Case {
    dims: Dims,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    dy: Vec<f64>,
    sinks: Option<Vec<f64>>,
    scale: f64,
}

/// The expected gradients.
struct Want {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    dsinks: Vec<f64>,
}

impl Case {
    fn new(dims: Dims, sinks: bool, seed: u64) -> Case {
        let nq = dims.batch * dims.heads * dims.seqlen * dims.head_dim;
        let nk = dims.batch * dims.kv_heads * dims.seqlen * dims.head_dim;
        Case {
            dims,
            q: uniform(nq, seed, -1.0, 1.0),
            k: uniform(nk, seed + 1, -1.0, 1.0),
            v: uniform(nk, seed + 2, -1.0, 1.0),
            dy: uniform(nq, seed + 3, -1.0, 1.0),
            sinks: sinks.then(|| uniform(dims.heads, seed + 4, -1.0, 3.0)),
            scale: 0.4,
        }
    }

    /// Runs the backward ring on inputs rounded to `dtype` and returns its outputs
    /// and the reference gradients of those rounded inputs.
    fn run(&self, w: usize, layout: SeqLayout, causal: bool, lnc: usize, precision: Precision, dtype: Dtype) -> (RingBwdOutputs, Want) {
        let Dims { batch: b, heads: h, kv_heads: hk, seqlen: s, head_dim: d } = self.dims;
        let r = |x: &[f64]| as_dtype(x, dtype);
        let (q, k, v, dy) = (r(&self.q), r(&self.k), r(&self.v), r(&self.dy));
        let f = Features { causal, sinks: self.sinks.as_deref(), ..Features::default() };
        let fwd = attend(&q, &k, &v, &self.dims, self.scale, &f);
        // The kernel receives O in the input dtype and the LSE in fp32.
        let fwd = nki::attention::reference::Attention { out: r(&fwd.out), lse: as_dtype(&fwd.lse, Dtype::F32) };
        let g = attend_backward(&q, &k, &v, &dy, &fwd, &self.dims, self.scale, &f);
        let t = |x: &[f64], heads: usize| common::tensor(&[b, heads, s, d], x, dtype);
        let sh = |x: &[f64], heads: usize| shard(&t(x, heads), w, layout, true).unwrap();
        let (qs, ks, vs, os, dys) = (sh(&q, h), sh(&k, hk), sh(&v, hk), sh(&fwd.out, h), sh(&dy, h));
        let lse = shard_lse(&common::tensor(&[b, h, s], &fwd.lse, Dtype::F32), w, layout).unwrap();
        let sinks = self.sinks.as_ref().map(|x| common::tensor(&[h], x, Dtype::F32));
        let cfg = RingBwdConfig::new(w as i64)
            .causal(causal)
            .striped(layout == SeqLayout::Striped)
            .softmax_scale(self.scale)
            .lnc(lnc as i64)
            .kv_heads(hk as i64);
        let launch = Launch::new().ranks(w).lnc(lnc).precision(precision);
        let inputs = RingBwdInputs { q: &qs, k: &ks, v: &vs, o: &os, dy: &dys, lse: &lse, sinks: sinks.as_ref() };
        let outs = cfg.launch(&launch, &inputs).unwrap();
        (outs, Want { dq: g.dq, dk: g.dk, dv: g.dv, dsinks: g.dsinks })
    }

    fn check(&self, w: usize, layout: SeqLayout, causal: bool, lnc: usize, precision: Precision) {
        let (dtype, atol, rtol) = match precision {
            Precision::Fp32 => (Dtype::F32, 1e-6, 1e-4),
            _ => (Dtype::Bf16, 1e-2, 1e-2),
        };
        let (outs, want) = self.run(w, layout, causal, lnc, precision, dtype);
        let what = format!(
            "W{w} {layout:?} causal={causal} lnc{lnc} {precision:?} h{}:{} sinks={}",
            self.dims.heads,
            self.dims.kv_heads,
            self.sinks.is_some()
        );
        let global = |parts: &[Tensor]| unshard(parts, layout, true).unwrap().to_f32_vec();
        assert_close(&format!("{what} dQ"), &global(&outs.dq), &want.dq, atol, rtol);
        assert_close(&format!("{what} dK"), &global(&outs.dk), &want.dk, atol, rtol);
        assert_close(&format!("{what} dV"), &global(&outs.dv), &want.dv, atol, rtol);
        match &outs.dsinks {
            Some(ds) => assert_close(&format!("{what} dsinks"), &ds.to_f32_vec(), &want.dsinks, atol, rtol),
            None => assert!(self.sinks.is_none(), "{what}: sinks given but no dsinks returned"),
        }
    }
}

fn dims(w: usize, heads: usize, kv_heads: usize, s_local: usize, d: usize) -> Dims {
    Dims { batch: 1, heads, kv_heads, seqlen: w * s_local, head_dim: d }
}

const LAYOUTS: [(SeqLayout, bool); 3] = [(SeqLayout::Contiguous, false), (SeqLayout::Contiguous, true), (SeqLayout::Striped, true)];

#[test]
fn grouped_query_gradients_match_the_reference_in_every_layout() {
    for (w, b, h, hk, lnc) in [(1, 1, 2, 1, 1), (2, 2, 4, 2, 2), (3, 1, 4, 1, 1), (4, 1, 8, 1, 2), (8, 1, 2, 1, 1)] {
        let case = Case::new(Dims { batch: b, ..dims(w, h, hk, 128, 32) }, false, 100 + w as u64);
        for (layout, causal) in LAYOUTS {
            case.check(w, layout, causal, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn sink_gradients_alone_and_with_grouped_queries_match_the_reference() {
    for (w, b, h, hk, lnc) in [(1, 1, 2, 2, 1), (2, 2, 2, 2, 2), (4, 1, 4, 2, 1), (3, 1, 3, 1, 2)] {
        let case = Case::new(Dims { batch: b, ..dims(w, h, hk, 128, 16) }, true, 200 + w as u64);
        for (layout, causal) in LAYOUTS {
            case.check(w, layout, causal, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn hardware_precision_stays_within_the_bf16_bounds() {
    let case = Case::new(dims(4, 4, 2, 128, 64), true, 301);
    case.check(4, SeqLayout::Striped, true, 2, Precision::Hardware);
    case.check(4, SeqLayout::Contiguous, false, 1, Precision::Hardware);
}

#[test]
fn the_sink_gradient_is_the_same_for_every_ring_size() {
    let case = Case::new(dims(8, 2, 1, 128, 16), true, 401);
    let dsinks = |w: usize| case.run(w, SeqLayout::Contiguous, true, 1, Precision::Fp32, Dtype::F32).0.dsinks.unwrap().to_f32_vec();
    let one = dsinks(1);
    assert!(one.iter().all(|x| x.abs() > 1e-3), "a sink that matters has a gradient: {one:?}");
    for w in [2, 4, 8] {
        let got = dsinks(w);
        assert!(one.iter().zip(&got).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + a.abs())), "W={w}: {got:?} vs W=1 {one:?}");
    }
}

#[test]
fn bad_kv_heads_are_refused_naming_the_parameter() {
    let case = Case::new(dims(2, 4, 4, 128, 16), false, 501);
    let t = |x: &[f64], heads: usize| common::tensor(&[1, heads, 256, 16], &x[..heads * 256 * 16], Dtype::F32);
    let sh = |x: &[f64], heads: usize| shard(&t(x, heads), 2, SeqLayout::Contiguous, true).unwrap();
    let (q, k, v, o, dy) = (sh(&case.q, 4), sh(&case.k, 3), sh(&case.v, 3), sh(&case.q, 4), sh(&case.dy, 4));
    let lse = shard_lse(&common::tensor(&[1, 4, 256], &[0.0; 1024], Dtype::F32), 2, SeqLayout::Contiguous).unwrap();
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingBwdInputs { q: &q, k: &k, v: &v, o: &o, dy: &dy, lse: &lse, sinks: None };
    let e = RingBwdConfig::new(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid kv_heads = 3 with 4 query heads: ring_attention_spmd_bwd: kv_heads must be >= 1 and divide the query heads (GQA)"
    );
    let e = RingBwdConfig::new(2).kv_heads(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert!(e.starts_with("invalid k[0] = shape [1, 3, 16, 128]: must be [1, 2, 16, 128]"), "{e}");
}
