//! `attention_bwd` numerics: the emulated DSL kernel (through the typed
//! `BwdConfig` API) against the independent float64 attention reference
//! (`nki_attention::reference`) at the library test's configurations: batch 1–2,
//! 1–3 heads, S 2048, d 128, causal or not, with and without two sinks, in both
//! precision modes; GQA and MQA with head dims 96 and 64; packed sequences
//! (`bound_min` / `bound_max`) with and without the causal mask and a sliding
//! window; and keys in several sections.
//!
//! The reference takes packed sequences as segment ids, the window `w` as
//! `(w - 1, S)`, and the sinks of a head as one logit `t = ln Σ_j exp(s_j)`:
//! the gradient of sink `j` is then `dt · exp(s_j − t)`, with
//! `dt[b, h] = −Σ_i exp(t − LSE_i)·D_i` from its documented formula (summed over
//! the batch it must equal the reference's own per-head sink gradient).
//!
//! Tolerances: `Precision::Fp32` (fp32 data) `max|a-b| <= 1e-4 max|ref| + 1e-6`;
//! `Precision::Hardware` (bf16 data, the inputs rounded before the reference)
//! the library test's `1e-5 + 2e-2 max|ref|`.

use crate::common::attention::{stats_layout, transpose_last2};
use crate::common::{as_dtype, assert_close, seed_of, tensor, uniform};
use nki::attention::bwd::{BwdConfig, BwdInputs, BwdOutputs};
use nki::attention::reference::{Attention, Dims, Features, attend, attend_backward};
use nki::{Dtype, Launch, Precision, Tensor};

const FP32_RTOL: f64 = 1e-4;
const FP32_ATOL: f64 = 1e-6;
const HW_RTOL: f64 = 2e-2;
const HW_ATOL: f64 = 1e-5;

/// One configuration of the library's tests.
#[derive(Clone, Debug)]
pub struct Case {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub seqlen: usize,
    pub head_dim: usize,
    pub causal: bool,
    /// 0: none.
    pub window: usize,
    /// 0: none; 1: `[B, N]`; more: `[B, N, num_sinks]`.
    pub num_sinks: usize,
    /// Packed sequence lengths (summing to `seqlen`), or empty.
    pub seqlens: Vec<usize>,
}

/// `attention_bwd`'s inputs in the kernel's layouts and the expected gradients.
pub struct Data {
    pub q: Tensor,
    pub k: Tensor,
    pub v: Tensor,
    pub o: Tensor,
    pub dy: Tensor,
    pub lse: Tensor,
    pub sinks: Option<Tensor>,
    pub bounds: Option<(Tensor, Tensor)>,
    /// dq, dk, dv in the kernel's layouts, then dsinks like the sinks.
    pub want: Vec<Vec<f64>>,
    pub scale: f64,
}

impl Data {
    pub fn inputs(&self) -> BwdInputs<'_> {
        BwdInputs {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            o: &self.o,
            dy: &self.dy,
            lse: &self.lse,
            sinks: self.sinks.as_ref(),
            bounds: self.bounds.as_ref().map(|(a, b)| (a, b)),
        }
    }
}

impl Case {
    pub fn config(&self) -> BwdConfig {
        BwdConfig::new().causal(self.causal).mixed_precision(true).sliding_window(self.window as i64).packed(!self.seqlens.is_empty())
    }

    /// Random inputs rounded to `dtype`, the forward's O (rounded) and LSE, and
    /// the float64 gradients.
    pub fn data(&self, name: &str, dtype: Dtype) -> Data {
        let (b, h, hk, s, d) = (self.batch, self.heads, self.kv_heads, self.seqlen, self.head_dim);
        let seed = seed_of(name);
        let draw = |n: usize, k: u64| as_dtype(&uniform(n, seed + k, -1.0, 1.0), dtype);
        let (q, k, v, dy) = (draw(b * h * s * d, 1), draw(b * hk * s * d, 2), draw(b * hk * s * d, 3), draw(b * h * s * d, 4));
        let ns = self.num_sinks.max(1);
        let sink_logits = draw(h * ns, 5);
        // One logit per head standing for its sinks: exp(t) = Σ_j exp(s_j).
        let merged: Vec<f64> = sink_logits.chunks(ns).map(|c| c.iter().map(|x| x.exp()).sum::<f64>().ln()).collect();
        let ids: Vec<i32> = (0..b).flat_map(|_| self.seqlens.iter().enumerate().flat_map(|(i, &n)| vec![i as i32; n])).collect();
        let f = Features {
            causal: self.causal,
            window: (self.window > 0).then_some((self.window - 1, s)),
            segments: (!self.seqlens.is_empty()).then_some((&ids[..], &ids[..])),
            sinks: (self.num_sinks > 0).then_some(&merged[..]),
            ..Features::default()
        };
        let dims = Dims { batch: b, heads: h, kv_heads: hk, seqlen: s, head_dim: d };
        let scale = 1.0 / (d as f64).sqrt();
        let fwd = attend(&q, &k, &v, &dims, scale, &f);
        let o = as_dtype(&fwd.out, dtype);
        let fwd = Attention { out: o.clone(), lse: fwd.lse };
        let g = attend_backward(&q, &k, &v, &dy, &fwd, &dims, scale, &f);
        let (bh, bhk) = (b * h, b * hk);
        let mut want = vec![transpose_last2(&g.dq, bh, s, d), transpose_last2(&g.dk, bhk, s, d), transpose_last2(&g.dv, bhk, s, d)];
        let mut sinks = None;
        if self.num_sinks > 0 {
            let mut dsinks = vec![0.0; bh * ns];
            for n in 0..bh {
                let t = merged[n % h];
                let rows = (0..s).map(|i| {
                    let dd: f64 = (0..d).map(|c| dy[(n * s + i) * d + c] * o[(n * s + i) * d + c]).sum();
                    (t - fwd.lse[n * s + i]).exp() * dd
                });
                let dt = -rows.sum::<f64>();
                for j in 0..ns {
                    dsinks[n * ns + j] = dt * (sink_logits[(n % h) * ns + j] - t).exp();
                }
            }
            for hd in 0..h {
                let total: f64 = (0..b).map(|bi| dsinks[(bi * h + hd) * ns..(bi * h + hd + 1) * ns].iter().sum::<f64>()).sum();
                assert!(
                    (total - g.dsinks[hd]).abs() <= 1e-9 * (1.0 + total.abs()),
                    "{name}: sink gradients {total} vs reference {}",
                    g.dsinks[hd]
                );
            }
            let shape = if self.num_sinks == 1 { vec![b, h] } else { vec![b, h, ns] };
            let logits: Vec<f64> = (0..b).flat_map(|_| sink_logits.iter().copied()).collect();
            sinks = Some(tensor(&shape, &logits, dtype));
            want.push(dsinks);
        }
        let bounds = (!self.seqlens.is_empty()).then(|| {
            let mut starts = Vec::new();
            let mut ends = Vec::new();
            let mut at = 0;
            for &n in &self.seqlens {
                starts.extend(vec![at as f64; n]);
                ends.extend(vec![(at + n) as f64; n]);
                at += n;
            }
            (tensor(&[s], &starts, Dtype::F32), tensor(&[s], &ends, Dtype::F32))
        });
        Data {
            q: tensor(&[b, h, d, s], &transpose_last2(&q, bh, s, d), dtype),
            k: tensor(&[b, hk, d, s], &transpose_last2(&k, bhk, s, d), dtype),
            v: tensor(&[b, hk, d, s], &transpose_last2(&v, bhk, s, d), dtype),
            o: tensor(&[b, h, d, s], &transpose_last2(&o, bh, s, d), dtype),
            dy: tensor(&[b, h, d, s], &transpose_last2(&dy, bh, s, d), dtype),
            lse: tensor(&[b, h, 128, s / 128], &stats_layout(&fwd.lse, bh, s, 0.0), Dtype::F32),
            sinks,
            bounds,
            want,
            scale,
        }
    }
}

/// The gradients as one list per output (dsinks last when there are sinks).
pub fn outputs(out: &BwdOutputs) -> Vec<Vec<f32>> {
    let mut all = vec![out.dq.to_f32_vec(), out.dk.to_f32_vec(), out.dv.to_f32_vec()];
    all.extend(out.dsinks.as_ref().map(Tensor::to_f32_vec));
    all
}

/// Runs `case` at LNC 2 in both precision modes against the reference.
fn check(name: &str, case: &Case) {
    for (precision, dtype, atol, rtol) in
        [(Precision::Fp32, Dtype::F32, FP32_ATOL, FP32_RTOL), (Precision::Hardware, Dtype::Bf16, HW_ATOL, HW_RTOL)]
    {
        check_one(name, case, precision, dtype, atol, rtol);
    }
}

fn check_one(name: &str, case: &Case, precision: Precision, dtype: Dtype, atol: f64, rtol: f64) {
    let x = case.data(name, dtype);
    let out = case.config().launch(&Launch::new().lnc(2).precision(precision), &x.inputs()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(out.dq.dtype(), dtype, "{name}: dq has q's dtype");
    assert_eq!(out.dsinks.is_some(), case.num_sinks > 0, "{name}: dsinks exactly with sinks");
    for ((what, got), want) in ["dq", "dk", "dv", "dsinks"].into_iter().zip(outputs(&out)).zip(&x.want) {
        assert_close(&format!("{name} {precision:?} {what}"), &got, want, atol, rtol);
    }
}

fn base(batch: usize, heads: usize, causal: bool, num_sinks: usize) -> Case {
    Case { batch, heads, kv_heads: heads, seqlen: 2048, head_dim: 128, causal, window: 0, num_sinks, seqlens: Vec::new() }
}

#[test]
fn library_base_one_head_causal_and_not() {
    check("b1 h1 causal", &base(1, 1, true, 0));
    check("b1 h1 full", &base(1, 1, false, 0));
}

#[test]
fn library_base_two_batches_three_heads_with_two_sinks() {
    check("b2 h3 causal sinks2", &base(2, 3, true, 2));
    check("b2 h3 full sinks2", &base(2, 3, false, 2));
}

#[test]
fn gqa_and_mqa_head_dims_96_and_64_window_and_one_sink() {
    let mqa = Case { kv_heads: 1, heads: 8, seqlen: 1024, head_dim: 96, ..base(1, 8, true, 0) };
    check("mqa d96", &mqa);
    let gqa = Case { kv_heads: 2, heads: 8, seqlen: 1024, head_dim: 64, window: 128, num_sinks: 1, ..base(1, 8, true, 0) };
    check("gqa window 128 sink", &gqa);
}

#[test]
fn packed_sequences_causal_windowed_and_full() {
    let packed = |seqlens: Vec<usize>, causal: bool, window: usize, head_dim: usize| Case {
        seqlen: seqlens.iter().sum(),
        head_dim,
        window,
        seqlens,
        ..base(1, 1, causal, 0)
    };
    check("pack 128 128 causal", &packed(vec![128, 128], true, 0, 128));
    check("pack 128 256 128 causal d64", &packed(vec![128, 256, 128], true, 0, 64));
    check("pack 128 384 causal window 64", &packed(vec![128, 384], true, 64, 128));
    check("pack 128 128 full", &packed(vec![128, 128], false, 0, 128));
    check("pack 127 129 255 513 causal gqa", &Case { heads: 4, kv_heads: 2, ..packed(vec![127, 129, 255, 513], true, 0, 64) });
}

/// d 256 takes two head-dim tiles, so sections of 4096 keys: a causal 8192-token
/// sequence runs in two sections, dQ carried from the first to the second.
#[test]
fn keys_in_two_sections_causal_d256() {
    let case = Case { seqlen: 8192, head_dim: 256, ..base(1, 1, true, 0) };
    check_one("sections d256", &case, Precision::Fp32, Dtype::F32, FP32_ATOL, FP32_RTOL);
}

/// Every rule is one message: the typed API's `validate` ends with it, and the
/// emitted kernel's assert (called directly, past the typed API) raises it.
#[test]
fn each_rule_is_one_message_in_the_api_and_the_kernel() {
    use nki::attention::bwd::attention_bwd::attention_bwd;
    use nki::attention::bwd::{BwdDims, BwdRule};
    let t = |shape: &[usize]| Tensor::from_f32(shape, &vec![0.25; shape.iter().product()], Dtype::F32).unwrap();
    let (q, k3, k_short, lse) = (t(&[1, 2, 64, 256]), t(&[1, 3, 64, 256]), t(&[1, 2, 64, 200]), t(&[1, 2, 128, 2]));
    let k_long = t(&[1, 2, 64, 512]);
    let dims = BwdDims { batch: 1, heads: 2, kv_heads: 2, seqlen_q: 256, seqlen_k: 256, head_dim: 64 };
    fn call<'a>(q: &'a Tensor, k: &'a Tensor, lse: &'a Tensor) -> attention_bwd::Call<'a> {
        attention_bwd::Call::new(q, k, k, q, q, lse)
    }
    let cases: Vec<(BwdConfig, BwdRule, attention_bwd::Call<'_>)> = vec![
        (BwdConfig::new().dims(BwdDims { kv_heads: 3, ..dims }), BwdRule::KvHeads, call(&q, &k3, &lse)),
        (BwdConfig::new().dims(BwdDims { seqlen_k: 200, ..dims }), BwdRule::SeqlenTiles, call(&q, &k_short, &lse)),
        (
            BwdConfig::new().causal(true).dims(BwdDims { seqlen_k: 512, ..dims }),
            BwdRule::CausalSeqlens,
            call(&q, &k_long, &lse).use_causal_mask(true),
        ),
        (BwdConfig::new().sliding_window(64), BwdRule::WindowNeedsCausal, call(&q, &q, &lse).sliding_window(Some(64))),
        (BwdConfig::new().softmax_scale(f64::INFINITY), BwdRule::ScaleNotFinite, call(&q, &q, &lse).softmax_scale(Some(f64::INFINITY))),
        (
            BwdConfig::new().causal(true).softmax_scale(-0.5),
            BwdRule::MaskedScale,
            call(&q, &q, &lse).use_causal_mask(true).softmax_scale(Some(-0.5)),
        ),
    ];
    for (config, rule, kernel_call) in cases {
        assert_eq!(config.violation(), Some(rule), "{config:?}");
        let api = config.validate().expect_err("the typed API refuses it").to_string();
        assert!(api.ends_with(&format!(": {}", rule.message())), "{api}");
        let err = kernel_call.launch(&Launch::new()).expect_err("the kernel refuses it").to_string();
        assert!(err.contains(rule.message()) && err.contains("attention_bwd.rs"), "{rule:?}: {err}");
    }
    // A head dim of 131 has no equal tiles of at most 128.
    assert_eq!(BwdConfig::new().dims(BwdDims { head_dim: 131, ..dims }).violation(), Some(BwdRule::HeadDimTiles));
    // Zero is the default scale (the library's `softmax_scale or ...`), so it unmasks nothing.
    assert_eq!(BwdConfig::new().causal(true).softmax_scale(0.0).violation(), None);
    // The bounds come together, and exactly with `packed`.
    let bound = t(&[256]);
    let err = call(&q, &q, &lse).bound_min(Some(&bound)).launch(&Launch::new()).unwrap_err().to_string();
    assert!(err.contains("bound_min and bound_max must both be given"), "{err}");
    let inputs = BwdInputs { q: &q, k: &q, v: &q, o: &q, dy: &q, lse: &lse, sinks: None, bounds: Some((&bound, &bound)) };
    let err = BwdConfig::new().launch(&Launch::new(), &inputs).unwrap_err().to_string();
    assert!(err.starts_with("invalid bound_min, bound_max = given: must be given exactly with"), "{err}");
    let sinks = t(&[2, 2]);
    let err = BwdConfig::new().packed(true).launch(&Launch::new(), &BwdInputs { sinks: Some(&sinks), ..inputs }).unwrap_err().to_string();
    assert!(err.starts_with("invalid sinks = shape [2, 2]: must be [1, 2] or [1, 2, num_sinks]"), "{err}");
}
