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

use crate::common;
use crate::common::ring_features::{self, FeatureCase, Inputs, Mask, PLAIN, dims};
use crate::common::{as_dtype, assert_close, uniform};
use nki::attention::reference::{Dims, attend, attend_backward};
use nki::attention::ring_bwd::{RingBwdConfig, RingBwdInputs, RingBwdOutputs};
use nki::attention::shard::{SeqLayout, shard, shard_lse, unshard};
use nki::{Dtype, Launch, Precision, Tensor};

/// One global problem and the output gradient `dy` `[b, h, S, d]`.
struct Case {
    x: Inputs,
    dy: Vec<f64>,
}

/// The expected gradients.
struct Want {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    dsinks: Vec<f64>,
}

impl Case {
    /// q, k, v from `seed` .. `seed + 2`, dy from `seed + 3`, sinks from `seed + 4`.
    fn new(dims: Dims, sinks: bool, seed: u64) -> Case {
        let x = Inputs::random(dims, seed, sinks.then_some(seed + 4));
        let dy = uniform(x.q.len(), seed + 3, -1.0, 1.0);
        Case { x, dy }
    }

    /// Runs the backward ring on inputs rounded to `dtype` and returns its outputs
    /// and the reference gradients of those rounded inputs.
    fn run(&self, w: usize, m: Mask, lnc: usize, precision: Precision, dtype: Dtype) -> (RingBwdOutputs, Want) {
        let layout = m.layout;
        let Dims { batch: b, heads: h, kv_heads: hk, seqlen: s, head_dim: d } = self.x.dims;
        let r = |x: &[f64]| as_dtype(x, dtype);
        let (q, k, v, dy) = (r(&self.x.q), r(&self.x.k), r(&self.x.v), r(&self.dy));
        let f = m.features(&self.x);
        let fwd = attend(&q, &k, &v, &self.x.dims, self.x.scale, &f);
        // The kernel receives O in the input dtype and the LSE in fp32.
        let fwd = nki::attention::reference::Attention { out: r(&fwd.out), lse: as_dtype(&fwd.lse, Dtype::F32) };
        let g = attend_backward(&q, &k, &v, &dy, &fwd, &self.x.dims, self.x.scale, &f);
        let t = |x: &[f64], heads: usize| common::tensor(&[b, heads, s, d], x, dtype);
        let sh = |x: &[f64], heads: usize| shard(&t(x, heads), w, layout, true).unwrap();
        let (qs, ks, vs, os, dys) = (sh(&q, h), sh(&k, hk), sh(&v, hk), sh(&fwd.out, h), sh(&dy, h));
        let lse = shard_lse(&common::tensor(&[b, h, s], &fwd.lse, Dtype::F32), w, layout).unwrap();
        let fs = self.x.feature_shards(w, layout);
        let cfg = m.configure(
            RingBwdConfig::new(w as i64).causal(m.causal).layout(layout).softmax_scale(self.x.scale).lnc(lnc as i64).kv_heads(hk as i64),
        );
        let launch = Launch::new().ranks(w).lnc(lnc).precision(precision);
        let inputs = RingBwdInputs {
            q: &qs,
            k: &ks,
            v: &vs,
            o: &os,
            dy: &dys,
            lse: &lse,
            sinks: fs.sinks.as_ref(),
            segment_ids: fs.segment_ids(),
            bias: fs.bias.as_deref(),
        };
        let outs = cfg.launch(&launch, &inputs).unwrap();
        (outs, Want { dq: g.dq, dk: g.dk, dv: g.dv, dsinks: g.dsinks })
    }
}

impl FeatureCase for Case {
    fn draw(dims: Dims, sinks: bool, seed: u64) -> Case {
        Case::new(dims, sinks, seed)
    }

    fn inputs(&mut self) -> &mut Inputs {
        &mut self.x
    }

    /// Runs the ring and checks dQ, dK, dV and dsinks against the reference.
    fn check(&self, w: usize, m: Mask, lnc: usize, precision: Precision) {
        let (dtype, atol, rtol) = match precision {
            Precision::Fp32 => (Dtype::F32, 1e-6, 1e-4),
            _ => (Dtype::Bf16, 1e-2, 1e-2),
        };
        let (outs, want) = self.run(w, m, lnc, precision, dtype);
        let what = self.x.label(w, m, lnc, precision);
        let global = |parts: &[Tensor]| unshard(parts, m.layout, true).unwrap().to_f32_vec();
        assert_close(&format!("{what} dQ"), &global(&outs.dq), &want.dq, atol, rtol);
        assert_close(&format!("{what} dK"), &global(&outs.dk), &want.dk, atol, rtol);
        assert_close(&format!("{what} dV"), &global(&outs.dv), &want.dv, atol, rtol);
        match &outs.dsinks {
            Some(ds) => assert_close(&format!("{what} dsinks"), &ds.to_f32_vec(), &want.dsinks, atol, rtol),
            None => assert!(self.x.sinks.is_none(), "{what}: sinks given but no dsinks returned"),
        }
    }
}

#[test]
fn grouped_query_gradients_match_the_reference_in_every_layout() {
    for (w, b, h, hk, lnc) in [(1, 1, 2, 1, 1), (2, 2, 4, 2, 2), (3, 1, 4, 1, 1), (4, 1, 8, 1, 2), (8, 1, 2, 1, 1)] {
        let case = Case::new(Dims { batch: b, ..dims(w, h, hk, 128, 32) }, false, 100 + w as u64);
        for m in PLAIN {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn sink_gradients_alone_and_with_grouped_queries_match_the_reference() {
    for (w, b, h, hk, lnc) in [(1, 1, 2, 2, 1), (2, 2, 2, 2, 2), (4, 1, 4, 2, 1), (3, 1, 3, 1, 2)] {
        let case = Case::new(Dims { batch: b, ..dims(w, h, hk, 128, 16) }, true, 200 + w as u64);
        for m in PLAIN {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn hardware_precision_stays_within_the_bf16_bounds() {
    let case = Case::new(dims(4, 4, 2, 128, 64), true, 301);
    case.check(4, Mask::plain(SeqLayout::Striped, true), 2, Precision::Hardware);
    case.check(4, Mask::plain(SeqLayout::Contiguous, false), 1, Precision::Hardware);
    case.check(4, Mask { window: Some((200, 0)), ..Mask::plain(SeqLayout::Zigzag, true) }, 1, Precision::Hardware);
}

#[test]
fn the_sink_gradient_is_the_same_for_every_ring_size() {
    let case = Case::new(dims(8, 2, 1, 128, 16), true, 401);
    let dsinks =
        |w: usize| case.run(w, Mask::plain(SeqLayout::Contiguous, true), 1, Precision::Fp32, Dtype::F32).0.dsinks.unwrap().to_f32_vec();
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
    let (q, k, v, o, dy) = (sh(&case.x.q, 4), sh(&case.x.k, 3), sh(&case.x.v, 3), sh(&case.x.q, 4), sh(&case.dy, 4));
    let lse = shard_lse(&common::tensor(&[1, 4, 256], &[0.0; 1024], Dtype::F32), 2, SeqLayout::Contiguous).unwrap();
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingBwdInputs { q: &q, k: &k, v: &v, o: &o, dy: &dy, lse: &lse, sinks: None, segment_ids: None, bias: None };
    let e = RingBwdConfig::new(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert_eq!(e, "invalid kv_heads = 3 with 4 query heads: ring attention: kv_heads must be >= 1 and divide the query heads (GQA)");
    let e = RingBwdConfig::new(2).kv_heads(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert!(e.starts_with("invalid k[0] = shape [1, 3, 16, 128]: must be [1, 2, 16, 128]"), "{e}");
}

#[test]
fn windows_chunks_and_zigzag_gradients_match_the_reference() {
    ring_features::window_sweep::<Case>(599, (609, 128));
}

#[test]
fn a_causal_window_skips_the_steps_nobody_needs() {
    // Contiguous, W = 6, S_local = 128, L = 129: step t shows position me - t's queries these
    // keys, visible only when the queries wrapped round to one or two positions ahead
    // (t >= W - ceil(L / S) = 4); the other steps forward dQ unchanged.
    let case = Case::new(dims(6, 2, 1, 128, 16), false, 700);
    let m = Mask { window: Some((129, 0)), ..Mask::plain(SeqLayout::Contiguous, true) };
    let (outs, _) = case.run(6, m, 1, Precision::Fp32, Dtype::F32);
    let reduces = outs.comm.iter().filter(|e| e.op == "collective_permute_implicit_reduce").count();
    // One ring per query head (2 heads share the KV head), each reducing dQ at steps 4 and 5.
    assert_eq!(reduces, 2 * 2, "{:?}", outs.comm.iter().map(|e| e.op).collect::<Vec<_>>());
    case.check(6, m, 1, Precision::Fp32);
}

#[test]
fn layout_window_and_chunk_rules_are_errors_naming_the_parameter() {
    let case = Case::new(dims(2, 2, 2, 128, 16), false, 801);
    let sh = |x: &[f64]| shard(&common::tensor(&[1, 2, 256, 16], x, Dtype::F32), 2, SeqLayout::Contiguous, true).unwrap();
    let (q, k, v, dy) = (sh(&case.x.q), sh(&case.x.k), sh(&case.x.v), sh(&case.dy));
    let lse = shard_lse(&common::tensor(&[1, 2, 256], &[2.0; 512], Dtype::F32), 2, SeqLayout::Contiguous).unwrap();
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingBwdInputs { q: &q, k: &k, v: &v, o: &q, dy: &dy, lse: &lse, sinks: None, segment_ids: None, bias: None };
    let err = |cfg: RingBwdConfig| cfg.launch(&launch, &inputs).unwrap_err().to_string();
    let base = RingBwdConfig::new(2);
    assert_eq!(
        err(base.zigzag(true)),
        "invalid zigzag_attention = true without use_causal_mask: ring attention: zigzag input needs the causal mask (use_causal_mask)"
    );
    // The layout is one value: the last of striped and zigzag set wins.
    assert_eq!(base.causal(true).striped(true).zigzag(true).seq_layout(), SeqLayout::Zigzag);
    assert_eq!(base.causal(true).zigzag(true).striped(true).seq_layout(), SeqLayout::Striped);
    assert_eq!(
        err(base.sliding_window(-1, 0)),
        "invalid sliding_window = (-1, 0): ring attention: the sliding window sizes (L, R) must be >= 0"
    );
    assert_eq!(err(base.chunk_size(0)), "invalid chunk_size = 0: ring attention: chunk_size must be >= 1");
    assert_eq!(
        err(base.soft_cap(f64::INFINITY)),
        "invalid soft_cap = inf: ring attention: soft_cap must be a positive finite float32 value"
    );
}

/// With windows, chunks, zigzag blocks or segment ids the SBUF footprint the
/// rule uses (`RingBwdConfig::sbuf_bytes`: two fp32 bound tiles per query row;
/// the ids' tiles) bounds the emulator's measured peak (the bytes live at once);
/// in these shapes a bias adds nothing at the peak (its tile lives beside the
/// masked scores, whose phase stays below the transposes' here; the footprint
/// does not count it).
#[test]
fn masked_sbuf_footprint_bounds_the_measured_peak() {
    use nki::attention::ring_bwd::ring_attention_bwd::ring_attention_spmd_bwd;
    use nki::attention::ring_fwd::RingDims;
    for (w, sl, d, layout, window, chunk) in [
        (2usize, 512usize, 64usize, SeqLayout::Zigzag, None, None),
        (3, 1024, 128, SeqLayout::Contiguous, Some(300i64), None),
        (1, 256, 32, SeqLayout::Striped, None, Some(64i64)),
    ] {
        for (cap, segments, biased) in [(None, false, false), (Some(2.0), false, false), (None, true, false), (None, false, true)] {
            let t = |shape: &[usize]| common::tensor(shape, &vec![0.25; shape.iter().product()], Dtype::F32);
            let data = t(&[1, 1, d, sl]);
            let lse = t(&[1, 1, 128, sl / 128]);
            let ids = common::tensor(&[1, sl], &vec![1.0; sl], Dtype::I32);
            let bias = t(&[1, 1, sl, w * sl]);
            let launch = Launch::new().ranks(w).precision(Precision::Fp32);
            let report = launch
                .run_all(|ctx| {
                    ring_attention_spmd_bwd::Call::new(&data, &data, &data, &data, &data, &lse)
                        .use_causal_mask(true)
                        .num_workers(w as i64)
                        .striped_attention(layout == SeqLayout::Striped)
                        .zigzag_attention(layout == SeqLayout::Zigzag)
                        .window_left(window)
                        .chunk_size(chunk)
                        .soft_cap(cap)
                        .q_segment_ids(segments.then_some(&ids))
                        .kv_segment_ids(segments.then_some(&ids))
                        .bias(biased.then_some(&bias))
                        .run(ctx)
                })
                .unwrap();
            let got = report.memory.iter().flatten().map(|m| m.sbuf_peak).max().unwrap();
            let mut cfg = RingBwdConfig::new(w as i64)
                .causal(true)
                .layout(layout)
                .dims(RingDims { batch: 1, heads: 1, seqlen: sl as i64, head_dim: d as i64 })
                .dtype(Dtype::F32)
                .segment_ids(segments);
            if let Some(l) = window {
                cfg = cfg.sliding_window(l, 0);
            }
            if let Some(c) = chunk {
                cfg = cfg.chunk_size(c);
            }
            if let Some(c) = cap {
                cfg = cfg.soft_cap(c);
            }
            let what =
                format!("W{w} S{sl} d{d} {layout:?} window {window:?} chunk {chunk:?} cap {cap:?} segments {segments} bias {biased}");
            assert!(got as i64 <= cfg.sbuf_bytes().unwrap(), "{what}: measured {got} B");
        }
    }
}

#[test]
fn soft_capped_gradients_match_the_reference_alone_and_with_every_other_feature() {
    ring_features::soft_cap_sweep::<Case>(940);
}

#[test]
fn segment_ids_alone_and_with_every_other_feature_match_the_reference() {
    ring_features::segment_sweep::<Case>(260);
}

#[test]
fn a_bias_alone_and_with_every_other_feature_matches_the_reference() {
    ring_features::bias_sweep::<Case>(460);
}
