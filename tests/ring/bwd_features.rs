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

use crate::common::{as_dtype, assert_close, packed_segment_ids, uniform};
use nki::attention::reference::{Dims, Features, attend, attend_backward};
use nki::attention::ring_bwd::{RingBwdConfig, RingBwdInputs, RingBwdOutputs};
use nki::attention::shard::{SeqLayout, shard, shard_bias, shard_ids, shard_lse, unshard};
use nki::{Dtype, Launch, Precision, Tensor};

/// The layout and the masks of one run.
#[derive(Clone, Copy, Debug)]
struct Mask {
    layout: SeqLayout,
    causal: bool,
    window: Option<(usize, usize)>,
    chunk: Option<usize>,
    cap: Option<f64>,
}

impl Mask {
    const fn plain(layout: SeqLayout, causal: bool) -> Mask {
        Mask { layout, causal, window: None, chunk: None, cap: None }
    }
}

/// One global problem: `q`, `dy` `[b, h, S, d]`, `k`, `v` `[b, h_kv, S, d]`.
struct Case {
    dims: Dims,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    dy: Vec<f64>,
    sinks: Option<Vec<f64>>,
    /// Global `(q, kv)` segment ids, `[b, S]` each.
    segments: Option<(Vec<i32>, Vec<i32>)>,
    /// Global bias `[b, h, S, S]`.
    bias: Option<Vec<f64>>,
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
            segments: None,
            bias: None,
            scale: 0.4,
        }
    }

    /// Runs the backward ring on inputs rounded to `dtype` and returns its outputs
    /// and the reference gradients of those rounded inputs.
    fn run(&self, w: usize, m: Mask, lnc: usize, precision: Precision, dtype: Dtype) -> (RingBwdOutputs, Want) {
        let (layout, causal) = (m.layout, m.causal);
        let Dims { batch: b, heads: h, kv_heads: hk, seqlen: s, head_dim: d } = self.dims;
        let r = |x: &[f64]| as_dtype(x, dtype);
        let (q, k, v, dy) = (r(&self.q), r(&self.k), r(&self.v), r(&self.dy));
        let segments = self.segments.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
        let f = Features {
            causal,
            window: m.window,
            chunk: m.chunk,
            soft_cap: m.cap,
            sinks: self.sinks.as_deref(),
            segments,
            bias: self.bias.as_deref(),
        };
        let fwd = attend(&q, &k, &v, &self.dims, self.scale, &f);
        // The kernel receives O in the input dtype and the LSE in fp32.
        let fwd = nki::attention::reference::Attention { out: r(&fwd.out), lse: as_dtype(&fwd.lse, Dtype::F32) };
        let g = attend_backward(&q, &k, &v, &dy, &fwd, &self.dims, self.scale, &f);
        let t = |x: &[f64], heads: usize| common::tensor(&[b, heads, s, d], x, dtype);
        let sh = |x: &[f64], heads: usize| shard(&t(x, heads), w, layout, true).unwrap();
        let (qs, ks, vs, os, dys) = (sh(&q, h), sh(&k, hk), sh(&v, hk), sh(&fwd.out, h), sh(&dy, h));
        let lse = shard_lse(&common::tensor(&[b, h, s], &fwd.lse, Dtype::F32), w, layout).unwrap();
        let sinks = self.sinks.as_ref().map(|x| common::tensor(&[h], x, Dtype::F32));
        let ids = |x: &[i32]| {
            let t = Tensor::from_i64(&[b, s], &x.iter().map(|&i| i as i64).collect::<Vec<_>>(), Dtype::I32).unwrap();
            shard_ids(&t, w, layout).unwrap()
        };
        let segs = self.segments.as_ref().map(|(q, kv)| (ids(q), ids(kv)));
        let segment_ids = segs.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
        let bias = self.bias.as_ref().map(|x| shard_bias(&common::tensor(&[b, h, s, s], x, Dtype::F32), w, layout).unwrap());
        let mut cfg =
            RingBwdConfig::new(w as i64).causal(causal).layout(layout).softmax_scale(self.scale).lnc(lnc as i64).kv_heads(hk as i64);
        if let Some((l, r)) = m.window {
            cfg = cfg.sliding_window(l as i64, r as i64);
        }
        if let Some(c) = m.chunk {
            cfg = cfg.chunk_size(c as i64);
        }
        if let Some(c) = m.cap {
            cfg = cfg.soft_cap(c);
        }
        let launch = Launch::new().ranks(w).lnc(lnc).precision(precision);
        let inputs = RingBwdInputs {
            q: &qs,
            k: &ks,
            v: &vs,
            o: &os,
            dy: &dys,
            lse: &lse,
            sinks: sinks.as_ref(),
            segment_ids,
            bias: bias.as_deref(),
        };
        let outs = cfg.launch(&launch, &inputs).unwrap();
        (outs, Want { dq: g.dq, dk: g.dk, dv: g.dv, dsinks: g.dsinks })
    }

    fn check(&self, w: usize, m: Mask, lnc: usize, precision: Precision) {
        let layout = m.layout;
        let (dtype, atol, rtol) = match precision {
            Precision::Fp32 => (Dtype::F32, 1e-6, 1e-4),
            _ => (Dtype::Bf16, 1e-2, 1e-2),
        };
        let (outs, want) = self.run(w, m, lnc, precision, dtype);
        let what = format!(
            "W{w} {m:?} lnc{lnc} {precision:?} h{}:{} sinks={} segments={}",
            self.dims.heads,
            self.dims.kv_heads,
            self.sinks.is_some(),
            self.segments.is_some(),
        ) + if self.bias.is_some() { " bias" } else { "" };
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

const LAYOUTS: [Mask; 3] =
    [Mask::plain(SeqLayout::Contiguous, false), Mask::plain(SeqLayout::Contiguous, true), Mask::plain(SeqLayout::Striped, true)];

#[test]
fn grouped_query_gradients_match_the_reference_in_every_layout() {
    for (w, b, h, hk, lnc) in [(1, 1, 2, 1, 1), (2, 2, 4, 2, 2), (3, 1, 4, 1, 1), (4, 1, 8, 1, 2), (8, 1, 2, 1, 1)] {
        let case = Case::new(Dims { batch: b, ..dims(w, h, hk, 128, 32) }, false, 100 + w as u64);
        for m in LAYOUTS {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn sink_gradients_alone_and_with_grouped_queries_match_the_reference() {
    for (w, b, h, hk, lnc) in [(1, 1, 2, 2, 1), (2, 2, 2, 2, 2), (4, 1, 4, 2, 1), (3, 1, 3, 1, 2)] {
        let case = Case::new(Dims { batch: b, ..dims(w, h, hk, 128, 16) }, true, 200 + w as u64);
        for m in LAYOUTS {
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
    let (q, k, v, o, dy) = (sh(&case.q, 4), sh(&case.k, 3), sh(&case.v, 3), sh(&case.q, 4), sh(&case.dy, 4));
    let lse = shard_lse(&common::tensor(&[1, 4, 256], &[0.0; 1024], Dtype::F32), 2, SeqLayout::Contiguous).unwrap();
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingBwdInputs { q: &q, k: &k, v: &v, o: &o, dy: &dy, lse: &lse, sinks: None, segment_ids: None, bias: None };
    let e = RingBwdConfig::new(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid kv_heads = 3 with 4 query heads: ring_attention_spmd_bwd: kv_heads must be >= 1 and divide the query heads (GQA)"
    );
    let e = RingBwdConfig::new(2).kv_heads(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert!(e.starts_with("invalid k[0] = shape [1, 3, 16, 128]: must be [1, 2, 16, 128]"), "{e}");
}

#[test]
fn windows_chunks_and_zigzag_gradients_match_the_reference() {
    use SeqLayout::{Contiguous, Striped, Zigzag};
    let masks = [
        Mask::plain(Zigzag, true),
        Mask { window: Some((100, 100)), ..Mask::plain(Contiguous, true) },
        Mask { window: Some((300, 0)), ..Mask::plain(Striped, true) },
        Mask { window: Some((77, 0)), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((130, 40)), ..Mask::plain(Contiguous, false) },
        Mask { chunk: Some(96), ..Mask::plain(Contiguous, false) },
        Mask { chunk: Some(200), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((50, 0)), chunk: Some(160), ..Mask::plain(Striped, true) },
    ];
    for (w, h, hk, lnc) in [(1, 2, 1, 1), (2, 2, 2, 2), (3, 4, 2, 1), (4, 2, 1, 2)] {
        let case = Case::new(dims(w, h, hk, 128, 16), w % 2 == 0, 600 + w as u64);
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
    let case = Case::new(dims(8, 2, 1, 128, 16), true, 609);
    for m in [masks[0], masks[1], masks[3], masks[4]] {
        case.check(8, m, 1, Precision::Fp32);
    }
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
    let (q, k, v, dy) = (sh(&case.q), sh(&case.k), sh(&case.v), sh(&case.dy));
    let lse = shard_lse(&common::tensor(&[1, 2, 256], &[2.0; 512], Dtype::F32), 2, SeqLayout::Contiguous).unwrap();
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingBwdInputs { q: &q, k: &k, v: &v, o: &q, dy: &dy, lse: &lse, sinks: None, segment_ids: None, bias: None };
    let err = |cfg: RingBwdConfig| cfg.launch(&launch, &inputs).unwrap_err().to_string();
    let base = RingBwdConfig::new(2);
    assert_eq!(
        err(base.zigzag(true)),
        "invalid zigzag_attention = true without use_causal_mask: ring_attention_spmd_bwd: zigzag input needs the causal mask (use_causal_mask)"
    );
    // The layout is one value: the last of striped and zigzag set wins.
    assert_eq!(base.causal(true).striped(true).zigzag(true).seq_layout(), SeqLayout::Zigzag);
    assert_eq!(base.causal(true).zigzag(true).striped(true).seq_layout(), SeqLayout::Striped);
    assert_eq!(
        err(base.sliding_window(-1, 0)),
        "invalid sliding_window = (-1, 0): ring_attention_spmd_bwd: the sliding window sizes (L, R) must be >= 0"
    );
    assert_eq!(err(base.chunk_size(0)), "invalid chunk_size = 0: ring_attention_spmd_bwd: chunk_size must be >= 1");
    assert_eq!(
        err(base.soft_cap(f64::INFINITY)),
        "invalid soft_cap = inf: ring_attention_spmd_bwd: soft_cap must be a positive finite float32 value"
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
    use SeqLayout::{Contiguous, Striped, Zigzag};
    let masks = [
        Mask { cap: Some(1.5), ..Mask::plain(Contiguous, false) },
        Mask { cap: Some(0.7), ..Mask::plain(Striped, true) },
        Mask { cap: Some(2.0), ..Mask::plain(Zigzag, true) },
        Mask { cap: Some(1.0), window: Some((90, 20)), chunk: Some(200), ..Mask::plain(Contiguous, false) },
        Mask { cap: Some(3.0), window: Some((150, 0)), ..Mask::plain(Zigzag, true) },
    ];
    for (w, h, hk, sl, lnc) in [(1, 2, 1, 128, 1), (2, 2, 2, 256, 2), (3, 4, 2, 128, 1), (4, 2, 1, 256, 2)] {
        let mut case = Case::new(dims(w, h, hk, sl, 16), w % 2 == 1, 941 + w as u64);
        case.q.iter_mut().for_each(|x| *x *= 6.0);
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
    let mut case = Case::new(dims(4, 4, 2, 256, 64), true, 949);
    case.q.iter_mut().for_each(|x| *x *= 6.0);
    case.check(4, masks[2], 2, Precision::Hardware);
}

#[test]
fn segment_ids_alone_and_with_every_other_feature_match_the_reference() {
    use SeqLayout::{Contiguous, Striped, Zigzag};
    let masks = [
        Mask::plain(Contiguous, false),
        Mask::plain(Contiguous, true),
        Mask::plain(Striped, true),
        Mask::plain(Zigzag, true),
        Mask { window: Some((150, 0)), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((90, 20)), chunk: Some(200), cap: Some(2.0), ..Mask::plain(Contiguous, false) },
    ];
    for (w, h, hk, sl, lnc, sinks) in [(1, 2, 1, 128, 1, false), (2, 2, 2, 256, 2, true), (3, 4, 2, 128, 1, false), (4, 2, 1, 128, 2, true)]
    {
        let mut case = Case::new(Dims { batch: 2, ..dims(w, h, hk, sl, 16) }, sinks, 261 + w as u64);
        case.segments = Some(packed_segment_ids(2, w * sl, 271 + w as u64));
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
    let mut case = Case::new(Dims { batch: 2, ..dims(4, 4, 2, 256, 64) }, false, 279);
    case.segments = Some(packed_segment_ids(2, 1024, 281));
    case.check(4, masks[3], 2, Precision::Hardware);
}

#[test]
fn a_bias_alone_and_with_every_other_feature_matches_the_reference() {
    use SeqLayout::{Contiguous, Striped, Zigzag};
    let masks = [
        Mask::plain(Contiguous, false),
        Mask::plain(Contiguous, true),
        Mask::plain(Striped, true),
        Mask::plain(Zigzag, true),
        Mask { window: Some((150, 0)), cap: Some(2.0), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((90, 20)), chunk: Some(200), ..Mask::plain(Striped, true) },
    ];
    for (w, h, hk, sl, lnc, sinks) in [(1, 2, 1, 128, 1, false), (2, 2, 2, 256, 2, true), (3, 4, 2, 128, 1, false), (4, 2, 1, 128, 2, true)]
    {
        let mut case = Case::new(Dims { batch: 2, ..dims(w, h, hk, sl, 16) }, sinks, 461 + w as u64);
        let s = w * sl;
        case.bias = Some(uniform(2 * h * s * s, 467 + w as u64, -2.0, 2.0));
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
        case.segments = Some(packed_segment_ids(2, s, 471 + w as u64));
        case.check(w, masks[3], lnc, Precision::Fp32);
    }
    let mut case = Case::new(Dims { batch: 1, ..dims(4, 4, 2, 256, 64) }, true, 479);
    case.bias = Some(uniform(4 * 1024 * 1024, 483, -2.0, 2.0));
    case.check(4, masks[2], 2, Precision::Hardware);
}
