//! `ring_attention_spmd_fwd`'s features past the NKI library's — grouped-query
//! K/V (`h_kv` heads) and sinks — through the typed API, against the float64
//! reference (`nki_attention::reference::attend`) on the unsharded tensors.
//!
//! * numerics: GQA 2:1, 4:1 and 8:1 (MQA), sinks alone and with GQA; W ∈ {1, 2,
//!   3, 4, 8}; contiguous × {causal, non-causal}, striped × causal; LNC 1 and 2.
//!   `fp32`: `max|a-b| <= 1e-5·max|ref| + 1e-6` on the output and the LSE;
//!   `hardware` (bf16 inputs, the reference on the rounded inputs):
//!   `<= 1e-3 + 1e-2·max|ref|` (today's ring bounds);
//! * sinks count once: the same with W = 1 and W = 8, and a huge sink drives
//!   every output to zero with LSE = sink;
//! * communication: with GQA 8:1 every permute moves 1/8 of the bytes of MHA;
//! * errors: kv_heads that do not divide the heads and malformed sinks are
//!   refused naming the parameter.

use crate::common;
use crate::common::ring_features::{self, FeatureCase, Inputs as Case, Mask, PLAIN, dims};
use crate::common::{as_dtype, assert_close, assert_close_lse, packed_segment_ids};
use nki::attention::reference::{Dims, Features, attend};
use nki::attention::ring_fwd::ring_attention_fwd::ring_attention_spmd_fwd;
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs, RingFwdOutputs};
use nki::attention::shard::{SeqLayout, shard, unshard, unshard_lse};
use nki::{Dtype, Launch, Precision, Tensor};

/// The forward ring's outputs for `x` rounded to `dtype` (the LSE included).
fn runs(x: &Case, w: usize, m: Mask, lnc: usize, precision: Precision, dtype: Dtype) -> RingFwdOutputs {
    let Dims { batch: b, heads: h, kv_heads: hk, seqlen: s, head_dim: d } = x.dims;
    let t = |v: &[f64], heads: usize| common::tensor(&[b, heads, s, d], v, dtype);
    let (q, k, v) = (
        shard(&t(&x.q, h), w, m.layout, true).unwrap(),
        shard(&t(&x.k, hk), w, m.layout, true).unwrap(),
        shard(&t(&x.v, hk), w, m.layout, false).unwrap(),
    );
    let f = x.feature_shards(w, m.layout);
    let cfg = m.configure(
        RingFwdConfig::new(w as i64).causal(m.causal).layout(m.layout).training(true).softmax_scale(x.scale).kv_heads(hk as i64),
    );
    let launch = Launch::new().ranks(w).lnc(lnc).precision(precision);
    let inputs =
        RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: f.sinks.as_ref(), segment_ids: f.segment_ids(), bias: f.bias.as_deref() };
    cfg.launch(&launch, &inputs).unwrap()
}

/// The float64 output and LSE of `x` with `m`.
fn reference(x: &Case, m: Mask) -> (Vec<f64>, Vec<f64>) {
    let r = attend(&x.q, &x.k, &x.v, &x.dims, x.scale, &m.features(x));
    (r.out, r.lse)
}

/// The forward ring's case is the problem itself.
impl FeatureCase for Case {
    fn draw(dims: Dims, sinks: bool, seed: u64) -> Case {
        Case::random(dims, seed, sinks.then_some(seed + 3))
    }

    fn inputs(&mut self) -> &mut Case {
        self
    }

    /// Runs the ring and checks the output and the LSE against the reference.
    fn check(&self, w: usize, m: Mask, lnc: usize, precision: Precision) {
        let (dtype, atol, rtol) = match precision {
            Precision::Fp32 => (Dtype::F32, 1e-6, 1e-5),
            _ => (Dtype::Bf16, 1e-3, 1e-2),
        };
        let exact = self.rounded(dtype);
        // Causal queries are scaled in fp32 and rounded again by the API.
        let seen = if m.causal && dtype != Dtype::F32 {
            let q: Vec<f64> = exact.q.iter().map(|&x| as_dtype(&[(x as f32 * self.scale as f32) as f64], dtype)[0] / self.scale).collect();
            Case { q, ..exact.rounded(Dtype::F32) }
        } else {
            exact
        };
        let (want_o, want_l) = reference(&seen, m);
        let outs = runs(self, w, m, lnc, precision, dtype);
        let what = self.label(w, m, lnc, precision);
        assert_close(&what, &unshard(&outs.out, m.layout, false).unwrap().to_f32_vec(), &want_o, atol, rtol);
        let lse = unshard_lse(&outs.lse.expect("training returns the LSE"), m.layout).unwrap().to_f32_vec();
        assert_close_lse(&format!("{what} LSE"), &lse, &want_l, atol, rtol);
    }
}

#[test]
fn grouped_query_rings_match_the_reference_in_every_layout() {
    for (w, h, hk, lnc) in [(1, 2, 1, 1), (2, 4, 2, 2), (3, 4, 1, 1), (4, 8, 1, 2), (8, 2, 1, 1)] {
        let case = Case::draw(dims(w, h, hk, 128, 32), false, 11 + w as u64);
        for m in PLAIN {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn sinks_alone_and_with_grouped_queries_match_the_reference() {
    for (w, h, hk, lnc) in [(1, 2, 2, 1), (2, 2, 2, 2), (4, 4, 2, 1), (3, 3, 1, 2)] {
        let case = Case::draw(dims(w, h, hk, 128, 16), true, 31 + w as u64);
        for m in PLAIN {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
}

#[test]
fn hardware_precision_stays_within_the_bf16_bounds() {
    let case = Case::draw(dims(4, 8, 2, 128, 64), true, 51);
    case.check(4, Mask::plain(SeqLayout::Striped, true), 2, Precision::Hardware);
    case.check(4, Mask::plain(SeqLayout::Contiguous, false), 1, Precision::Hardware);
    case.check(4, Mask { window: Some((200, 0)), ..Mask::plain(SeqLayout::Zigzag, true) }, 1, Precision::Hardware);
}

#[test]
fn a_sink_counts_once_however_many_steps() {
    // The same global problem on 1 and 8 ranks; and a sink of 60 outweighs every score.
    let mut case = Case::draw(dims(8, 2, 1, 128, 16), true, 61);
    let lse = |w: usize, c: &Case| {
        unshard_lse(
            &runs(c, w, Mask::plain(SeqLayout::Contiguous, true), 1, Precision::Fp32, Dtype::F32).lse.unwrap(),
            SeqLayout::Contiguous,
        )
        .unwrap()
        .to_f32_vec()
    };
    let (one, eight) = (lse(1, &case), lse(8, &case));
    assert!(one.iter().zip(&eight).all(|(a, b)| (a - b).abs() < 1e-5), "LSE differs between W=1 and W=8");
    case.sinks = Some(vec![60.0, 60.0]);
    let outs = runs(&case, 8, Mask::plain(SeqLayout::Striped, true), 1, Precision::Fp32, Dtype::F32);
    let out = unshard(&outs.out, SeqLayout::Striped, false).unwrap().to_f32_vec();
    assert!(out.iter().all(|x| x.abs() < 1e-20), "a dominant sink leaves no weight on the values");
    let lse = unshard_lse(&outs.lse.unwrap(), SeqLayout::Striped).unwrap().to_f32_vec();
    assert!(lse.iter().all(|&l| (l - 60.0).abs() < 1e-5), "LSE = the sink when it dominates");
}

#[test]
fn gqa_8_to_1_moves_an_eighth_of_the_bytes_per_step() {
    let w = 4;
    let bytes = |hk: usize| -> Vec<usize> {
        let outs = runs(
            &Case::draw(dims(w, 8, hk, 128, 32), false, 71),
            w,
            Mask::plain(SeqLayout::Contiguous, true),
            1,
            Precision::Fp32,
            Dtype::F32,
        );
        assert_eq!(outs.comm.len(), 2 * (w - 1), "one K and one V permute per transfer step");
        outs.comm.iter().map(|e| e.bytes).collect()
    };
    let (mha, gqa) = (bytes(8), bytes(1));
    // Every permute of the MHA ring moves W ranks' K or V: 8 heads x 128 tokens x 32 x 4 bytes each.
    assert!(mha.iter().all(|&b| b == w * 8 * 128 * 32 * 4), "{mha:?}");
    assert!(mha.iter().zip(&gqa).all(|(m, g)| m == &(8 * g)), "MHA {mha:?} vs GQA 8:1 {gqa:?}");
}

#[test]
fn bad_kv_heads_and_sinks_are_refused_naming_the_parameter() {
    let case = Case::draw(dims(2, 4, 4, 128, 16), false, 81);
    let t = |x: &[f64], heads: usize| common::tensor(&[1, heads, 256, 16], x, Dtype::F32);
    let (q, k, v) = (
        shard(&t(&case.q, 4), 2, SeqLayout::Contiguous, true).unwrap(),
        shard(&t(&case.k[..256 * 16 * 3], 3), 2, SeqLayout::Contiguous, true).unwrap(),
        shard(&t(&case.v[..256 * 16 * 3], 3), 2, SeqLayout::Contiguous, false).unwrap(),
    );
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: None, segment_ids: None, bias: None };
    let e = RingFwdConfig::new(2).launch(&launch, &inputs).unwrap_err().to_string();
    assert_eq!(e, "invalid kv_heads = 3 with 4 query heads: ring attention: kv_heads must be >= 1 and divide the query heads (GQA)");
    let (k, v) =
        (shard(&t(&case.k, 4), 2, SeqLayout::Contiguous, true).unwrap(), shard(&t(&case.v, 4), 2, SeqLayout::Contiguous, false).unwrap());
    let bad = Tensor::from_f32(&[3], &[0.0; 3], Dtype::F32).unwrap();
    let e = RingFwdConfig::new(2)
        .launch(&launch, &RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: Some(&bad), segment_ids: None, bias: None })
        .unwrap_err();
    assert!(e.to_string().starts_with("invalid sinks = float32 [3]: must be float32 [4]"), "{e}");
    let nan = Tensor::from_f32(&[4], &[0.0, f32::NAN, 0.0, 0.0], Dtype::F32).unwrap();
    let e = RingFwdConfig::new(2)
        .launch(&launch, &RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: Some(&nan), segment_ids: None, bias: None })
        .unwrap_err();
    assert!(e.to_string().contains("invalid sinks = NaN"), "{e}");
}

#[test]
fn windows_chunks_and_zigzag_match_the_reference() {
    ring_features::window_sweep::<Case>(90, (99, 256));
}

/// The ring steps some rank needs, from the reference mask by brute force: step
/// `t` brings position `(me - t) mod W`'s keys to position `me`.
fn needed_steps(w: usize, sl: usize, layout: SeqLayout, f: &Features<'_>) -> Vec<usize> {
    let st = w * sl;
    (1..w)
        .filter(|&t| {
            (0..w).any(|me| {
                let p = (me + w - t) % w;
                (0..sl).any(|i| (0..sl).any(|j| f.visible(st, 0, layout.global(me, i, w, sl), layout.global(p, j, w, sl))))
            })
        })
        .collect()
}

/// Permutes of a causal ring with a window of `l` tokens (K and V per transfer step).
fn window_permutes(w: usize, sl: usize, layout: SeqLayout, l: usize) -> usize {
    let mut case = Case::draw(dims(w, 2, 1, sl, 16), false, 111);
    case.q.iter_mut().for_each(|x| *x *= 0.5);
    let m = Mask { window: Some((l, 0)), ..Mask::plain(layout, true) };
    let outs = runs(&case, w, m, 1, Precision::Fp32, Dtype::F32);
    assert!(outs.comm.iter().all(|e| e.op == "collective_permute_implicit"), "only permutes");
    outs.comm.len()
}

#[test]
fn a_causal_window_turns_the_ring_only_as_far_as_it_reaches() {
    let (w, sl) = (6, 128);
    for l in [0, 1, 127, 128, 129, 300, 700] {
        let causal = Features { causal: true, window: Some((l, 0)), ..Features::default() };
        // Contiguous: the ceil(L / S_local) preceding blocks, at most W - 1.
        let want = l.div_ceil(sl).min(w - 1);
        assert_eq!(needed_steps(w, sl, SeqLayout::Contiguous, &causal).last().copied().unwrap_or(0), want, "contiguous L={l}");
        assert_eq!(window_permutes(w, sl, SeqLayout::Contiguous, l), 2 * want, "contiguous L={l}: K and V per transfer step");
        // Striped: the nearest earlier key of position me - t is t tokens back, so min(L, W - 1) steps.
        let want = l.min(w - 1);
        assert_eq!(needed_steps(w, sl, SeqLayout::Striped, &causal).last().copied().unwrap_or(0), want, "striped L={l}");
        assert_eq!(window_permutes(w, sl, SeqLayout::Striped, l), 2 * want, "striped L={l}");
        // Zigzag: every rank's second chunk needs the late chunks of the ranks after it, the
        // last steps of the ring, so any window L >= 1 turns it W - 1 times (steps between
        // the ones that reach are skipped in compute only).
        let want = if l == 0 { 0 } else { w - 1 };
        assert_eq!(needed_steps(w, sl, SeqLayout::Zigzag, &causal).last().copied().unwrap_or(0), want, "zigzag L={l}");
        assert_eq!(window_permutes(w, sl, SeqLayout::Zigzag, l), 2 * want, "zigzag L={l}");
    }
    // Without the causal mask a window (L, R >= 1) needs the successor's block, the last step.
    let two_sided = Features { window: Some((100, 1)), ..Features::default() };
    assert_eq!(needed_steps(w, sl, SeqLayout::Contiguous, &two_sided), vec![1, 5]);
}

#[test]
fn zigzag_gives_every_rank_the_same_visible_score_tiles() {
    // 64 x 64 score tiles with a visible score, per rank, over the whole ring (causal).
    let (w, sl, tile) = (4, 512, 64);
    let causal = Features::masked(true);
    let tiles = |layout: SeqLayout| -> Vec<usize> {
        (0..w)
            .map(|me| {
                (0..w)
                    .map(|p| {
                        let mut n = 0;
                        for qt in (0..sl).step_by(tile) {
                            for kt in (0..sl).step_by(tile) {
                                let q_last = layout.global(me, qt + tile - 1, w, sl).max(layout.global(me, qt, w, sl));
                                let k_first = layout.global(p, kt, w, sl).min(layout.global(p, kt + tile - 1, w, sl));
                                // Within a tile of one chunk the positions are consecutive: the tile has a
                                // visible score iff its first key is at or before its last query.
                                n += usize::from(causal.visible(w * sl, 0, q_last, k_first));
                            }
                        }
                        n
                    })
                    .sum()
            })
            .collect()
    };
    let (contiguous, zigzag) = (tiles(SeqLayout::Contiguous), tiles(SeqLayout::Zigzag));
    let spread = |x: &[usize]| x.iter().max().unwrap() - x.iter().min().unwrap();
    assert!(spread(&zigzag) <= 1, "zigzag tiles per rank {zigzag:?}");
    assert!(spread(&contiguous) > 100, "contiguous is unbalanced: {contiguous:?}");
    assert_eq!(zigzag.iter().sum::<usize>(), contiguous.iter().sum::<usize>(), "the same causal work in all");
}

#[test]
fn layout_window_and_chunk_rules_are_errors_naming_the_parameter() {
    let case = Case::draw(dims(2, 2, 2, 128, 16), false, 121);
    let t = |x: &[f64]| shard(&common::tensor(&[1, 2, 256, 16], x, Dtype::F32), 2, SeqLayout::Contiguous, true).unwrap();
    let (q, k) = (t(&case.q), t(&case.k));
    let v = shard(&common::tensor(&[1, 2, 256, 16], &case.v, Dtype::F32), 2, SeqLayout::Contiguous, false).unwrap();
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let inputs = RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: None, segment_ids: None, bias: None };
    let err = |cfg: RingFwdConfig| cfg.launch(&launch, &inputs).unwrap_err().to_string();
    let base = RingFwdConfig::new(2);
    assert_eq!(
        err(base.zigzag(true)),
        "invalid zigzag_input = true without use_causal_mask: ring attention: zigzag input needs the causal mask (use_causal_mask)"
    );
    // The layout is one value: the last of striped and zigzag set wins.
    assert_eq!(base.causal(true).striped(true).zigzag(true).seq_layout(), SeqLayout::Zigzag);
    assert_eq!(base.causal(true).zigzag(true).striped(true).seq_layout(), SeqLayout::Striped);
    assert_eq!(
        err(base.sliding_window(4, -2)),
        "invalid sliding_window = (4, -2): ring attention: the sliding window sizes (L, R) must be >= 0"
    );
    assert_eq!(err(base.chunk_size(0)), "invalid chunk_size = 0: ring attention: chunk_size must be >= 1");
    assert_eq!(
        err(base.soft_cap(f64::INFINITY)),
        "invalid soft_cap = inf: ring attention: soft_cap must be a positive finite float32 value"
    );
}

#[test]
fn zigzag_causal_half_size_steps_match_the_reference() {
    // 256 tokens per rank: after step 0 every step runs as two unmasked half-size calls.
    for (w, b, h, hk, lnc, sinks) in [(2, 1, 3, 3, 2, false), (3, 1, 2, 1, 1, true), (4, 3, 1, 1, 2, true), (4, 1, 4, 2, 1, false)] {
        let case = Case::draw(Dims { batch: b, ..dims(w, h, hk, 256, 16) }, sinks, 131 + w as u64);
        case.check(w, Mask::plain(SeqLayout::Zigzag, true), lnc, Precision::Fp32);
    }
    let case = Case::draw(dims(4, 2, 1, 512, 64), true, 139);
    case.check(4, Mask::plain(SeqLayout::Zigzag, true), 2, Precision::Hardware);
}

#[test]
fn key_segment_ids_travel_with_k_and_v_and_unseen_rows_are_zero() {
    let (w, b, sl) = (3, 2, 128);
    let mut case = Case::draw(Dims { batch: b, ..dims(w, 4, 2, sl, 16) }, false, 164);
    case.segments = Some(packed_segment_ids(b, w * sl, 174));
    let m = Mask::plain(SeqLayout::Zigzag, true);
    let outs = runs(&case, w, m, 1, Precision::Fp32, Dtype::F32);
    // Every step moves K, V, then the int32 ids of the visiting block.
    let kv_bytes = w * b * 2 * sl * 16 * 4;
    let sizes: Vec<usize> = outs.comm.iter().map(|e| e.bytes).collect();
    assert_eq!(sizes, [kv_bytes, kv_bytes, w * b * sl * 4].repeat(w - 1));
    // The rows whose id no key has: output 0 and LSE -inf, as in the reference.
    let (_, want_l) = reference(&case, m);
    let lse = unshard_lse(&outs.lse.unwrap(), m.layout).unwrap().to_f32_vec();
    let unseen: Vec<usize> = (0..lse.len()).filter(|&i| lse[i] == f32::NEG_INFINITY).collect();
    assert_eq!(unseen.len(), b * 4 * 20, "20 rows of every head see no key");
    assert!(unseen.iter().all(|&i| want_l[i] == f64::NEG_INFINITY));
    let out = unshard(&outs.out, m.layout, false).unwrap().to_f32_vec();
    assert!(unseen.iter().all(|&i| out[i * 16..(i + 1) * 16].iter().all(|&x| x == 0.0)));
}

#[test]
fn bad_segment_ids_are_refused_naming_the_parameter() {
    let case = Case::draw(dims(2, 2, 2, 128, 16), false, 83);
    let t = |x: &[f64]| common::tensor(&[1, 2, 256, 16], x, Dtype::F32);
    let (q, k, v) = (
        shard(&t(&case.q), 2, SeqLayout::Contiguous, true).unwrap(),
        shard(&t(&case.k), 2, SeqLayout::Contiguous, true).unwrap(),
        shard(&t(&case.v), 2, SeqLayout::Contiguous, false).unwrap(),
    );
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let ids = |shape: &[usize], x: i64, dtype: Dtype| vec![Tensor::from_i64(shape, &vec![x; shape.iter().product()], dtype).unwrap(); 2];
    let good = ids(&[1, 128], 3, Dtype::I32);
    let run = |q_ids: &[Tensor], kv_ids: &[Tensor]| {
        let inputs = RingFwdInputs { q: Queries::Raw(&q), k: &k, v: &v, sinks: None, segment_ids: Some((q_ids, kv_ids)), bias: None };
        RingFwdConfig::new(2).launch(&launch, &inputs).unwrap_err().to_string()
    };
    assert_eq!(run(&good[..1], &good), "invalid q_segment_ids = 1 tensors: needs one tensor per rank (2)");
    assert_eq!(
        run(&good, &ids(&[1, 256], 3, Dtype::I32)),
        "invalid kv_segment_ids[0] = int32 [1, 256]: must be int32 [1, 128] ([b, seqlen])"
    );
    assert_eq!(
        run(&ids(&[1, 128], 3, Dtype::F32), &good),
        "invalid q_segment_ids[0] = float32 [1, 128]: must be int32 [1, 128] ([b, seqlen])"
    );
    assert_eq!(
        run(&good, &ids(&[1, 128], 1 << 24, Dtype::I32)),
        "invalid kv_segment_ids[0] = 16777216: segment ids must be below 2^24 in magnitude"
    );
    // The emitted kernel wants both or neither.
    let e = ring_attention_spmd_fwd::Call::new(&q[0], &k[0], &v[0]).q_segment_ids(Some(&good[0])).launch(&Launch::new()).unwrap_err();
    assert!(e.message.contains("q_segment_ids and kv_segment_ids must both be set or both be None"), "{e}");
}

#[test]
fn soft_capped_logits_match_the_reference_alone_and_with_every_other_feature() {
    ring_features::soft_cap_sweep::<Case>(140);
}

#[test]
fn segment_ids_alone_and_with_every_other_feature_match_the_reference() {
    ring_features::segment_sweep::<Case>(160);
}

#[test]
fn a_bias_alone_and_with_every_other_feature_matches_the_reference() {
    ring_features::bias_sweep::<Case>(360);
}
