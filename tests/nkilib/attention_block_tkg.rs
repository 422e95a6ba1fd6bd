//! The library's `attention_block_tkg` against a float64 decode attention
//! block written from its documented computation — RMSNorm of `X`, the fused
//! QKV projection (+ bias), the Q/K RMSNorms over the head dim around RoPE,
//! `softmax(Q·Kᵀ · scale)` over the cache positions the mask shows and the new
//! tokens (causal among themselves; an optional sink logit per head), `@ V`,
//! the output projection (+ bias, optionally transposed out), and the cache
//! update at each batch's write position — at CI-sized versions of the
//! library's `test_attention_block_tkg.py` configurations (its `B`, `q_heads`,
//! `d_head`, `S_tkg` and options; smaller `H` and caches), in both precision
//! modes; its emitted source under NumPy against the emulator; its rules.

use crate::common::attention::{run_numpy_kwargs, run_numpy_kwargs_ranks};
use crate::common::sweep::{Mode, sweep};
use crate::common::{Arg, CaseName, as_dtype, assert_close, assert_numpy_close_to_emulator, emitted_package, seed_of, tensor, uniform};
use nki::attention::tkg::TkgRule;
use nki::emit::PyEnum;
use nki::ncc::ReplicaGroup;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::experimental::transformer::attention_block_tkg::{
    AttnBlockCall, AttnBlockRule, QuantizationType, attention_block_tkg, attn_block_violation,
};

/// One configuration (`lnc` 2 unless `lnc1`).
#[derive(Clone, Copy, Debug)]
struct Config {
    b: usize,
    nq: usize,
    d: usize,
    h: usize,
    ha: Option<usize>,
    s_ctx: usize,
    s_max: usize,
    s: usize,
    norm_x: bool,
    bias: bool,
    qk_pre: bool,
    qk_pre_gamma: bool,
    qk_post: bool,
    qk_post_gamma: bool,
    rope: bool,
    contiguous: bool,
    k_tp: bool,
    update: bool,
    out_proj: bool,
    transposed_out: bool,
    sink: bool,
    lnc1: bool,
    /// `skip_attention`: the queries as they are stand for the attention.
    skip_attn: bool,
    /// fp8 KV-cache quantization: `k_scale` and `v_scale` (this one value), fp8 caches.
    kv_scale: Option<f64>,
    /// Block length of a block cache (`[B·S_ctx/block_len, block_len, d]`
    /// read through `active_blocks_table`), 0 for a flat one.
    block_len: usize,
    /// KV data parallelism: the ranks sharing the batches (1: none). `nq` is
    /// then each rank's query heads.
    kvdp: usize,
}

/// The library's defaults: RMSNorm of X, RoPE (contiguous), cache update, projection.
const fn cfg(b: usize, nq: usize, d: usize, h: usize, s_ctx: usize, s: usize) -> Config {
    Config {
        b,
        nq,
        d,
        h,
        ha: None,
        s_ctx,
        s_max: s_ctx,
        s,
        norm_x: true,
        bias: false,
        qk_pre: false,
        qk_pre_gamma: false,
        qk_post: false,
        qk_post_gamma: false,
        rope: true,
        contiguous: true,
        k_tp: false,
        update: true,
        out_proj: true,
        transposed_out: false,
        sink: false,
        lnc1: false,
        skip_attn: false,
        kv_scale: None,
        block_len: 0,
        kvdp: 1,
    }
}

impl Config {
    const fn bias(mut self) -> Self {
        self.bias = true;
        self
    }
    const fn ha(mut self, ha: usize) -> Self {
        self.ha = Some(ha);
        self
    }
    const fn k_tp(mut self) -> Self {
        self.k_tp = true;
        self
    }
    const fn no_update(mut self) -> Self {
        self.update = false;
        self
    }
    const fn qk_pre(mut self, gamma: bool) -> Self {
        self.qk_pre = true;
        self.qk_pre_gamma = gamma;
        self
    }
    const fn qk_post(mut self, gamma: bool) -> Self {
        self.qk_post = true;
        self.qk_post_gamma = gamma;
        self
    }
    const fn no_norm_x(mut self) -> Self {
        self.norm_x = false;
        self
    }
    const fn no_rope(mut self) -> Self {
        self.rope = false;
        self
    }
    const fn interleaved(mut self) -> Self {
        self.contiguous = false;
        self
    }
    const fn no_proj(mut self) -> Self {
        self.out_proj = false;
        self
    }
    const fn transposed_out(mut self) -> Self {
        self.transposed_out = true;
        self
    }
    const fn sink(mut self) -> Self {
        self.sink = true;
        self
    }
    const fn max_ctx(mut self, s_max: usize) -> Self {
        self.s_max = s_max;
        self
    }
    const fn skip_attention(mut self) -> Self {
        self.skip_attn = true;
        self
    }
    const fn lnc1(mut self) -> Self {
        self.lnc1 = true;
        self
    }
}

/// CI-sized versions of the library's rows (their batch, heads, head dim,
/// new tokens and options; `H` and the caches smaller), and the options it
/// leaves out (interleaved RoPE, no projection, sink, transposed output,
/// a cache longer than the bucket, one program, `skip_attention`).
const CONFIGS: &[Config] = &[
    cfg(4, 8, 64, 512, 256, 1).ha(448),
    cfg(4, 8, 128, 512, 256, 1).qk_pre(false).qk_post(true).bias(),
    cfg(4, 1, 128, 512, 256, 5).no_update(),
    cfg(8, 8, 64, 256, 384, 5).bias(),
    cfg(4, 8, 64, 256, 256, 4).k_tp().bias(),
    cfg(16, 1, 128, 512, 256, 1).qk_pre(false),
    cfg(8, 4, 128, 256, 256, 3).no_update().qk_pre(true).bias(),
    cfg(32, 1, 64, 256, 128, 1).no_norm_x().bias(),
    cfg(32, 1, 64, 256, 128, 1).no_norm_x().k_tp().bias(),
    cfg(4, 2, 64, 512, 256, 2).interleaved().sink().max_ctx(512),
    cfg(2, 4, 64, 512, 256, 2).no_proj().no_rope(),
    cfg(2, 4, 128, 512, 256, 1).transposed_out().qk_post(false),
    cfg(3, 2, 128, 256, 256, 2).lnc1().k_tp(),
    cfg(2, 4, 64, 512, 256, 2).skip_attention().no_proj(),
    cfg(2, 4, 64, 512, 256, 1).skip_attention().bias(),
];

/// The inputs, row-major, in the kernel's layouts.
#[derive(Clone)]
struct Inputs {
    x: Vec<f64>,
    gamma: Vec<f64>,
    w_qkv: Vec<f64>,
    bias_qkv: Vec<f64>,
    /// Q pre, K pre, Q post, K post gammas `[d]`.
    qk_gammas: [Vec<f64>; 4],
    /// `[d/2, B, S]`.
    cos: Vec<f64>,
    sin: Vec<f64>,
    /// `[B, S_max, d]` (or `[B, d, S_max]` with `k_tp`).
    k_cache: Vec<f64>,
    v_cache: Vec<f64>,
    /// `[S_ctx, B, q_heads, S]`, 0 or 1.
    mask: Vec<f64>,
    /// `[q_heads]`.
    sink: Vec<f64>,
    /// Each batch's write position (its cache length).
    pos: Vec<usize>,
    /// `kv_cache_update_idx`: the positions, or a block cache's slots.
    idx: Vec<u64>,
    /// A block cache's `active_blocks_table` `[B, S_ctx/block_len]`: distinct blocks of the pool.
    table: Vec<usize>,
    w_out: Vec<f64>,
    bias_out: Vec<f64>,
}

/// The float64 outputs: the block's output and K, V (the caches or the new tokens).
struct Reference {
    out: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
}

/// One launch's (rank's) input tensors.
struct KernelTensors {
    x: Tensor,
    gamma: Tensor,
    w_qkv: Tensor,
    bias_qkv: Tensor,
    qk_gammas: Vec<Tensor>,
    cos: Tensor,
    sin: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    table: Option<Tensor>,
    k_scale: Tensor,
    v_scale: Tensor,
    mask: Tensor,
    sink: Tensor,
    idx: Tensor,
    w_out: Tensor,
    bias_out: Tensor,
}

/// The RMSNorm epsilons the cases pass: `rmsnorm_X_eps`, and the Q/K norms'
/// (`rmsnorm_QK_pre_rope_eps`, `rmsnorm_QK_post_rope_eps`).
const EPS_X: f64 = 1e-3;
const EPS_QK: f64 = 1e-5;

fn rms(x: &mut [f64], eps: f64, w: Option<&[f64]>) {
    let r = 1.0 / (x.iter().map(|a| a * a).sum::<f64>() / x.len() as f64 + eps).sqrt();
    for (i, a) in x.iter_mut().enumerate() {
        *a *= r * w.map_or(1.0, |w| w[i]);
    }
}

impl Config {
    fn i(&self) -> usize {
        self.d * (self.nq + 2)
    }
    fn bxs(&self) -> usize {
        self.b * self.s
    }
    fn lnc(&self) -> usize {
        if self.lnc1 { 1 } else { 2 }
    }
    fn split(&self) -> usize {
        self.s_ctx - self.s
    }

    /// The configuration's seed: its name, without the `kvdp` field when it
    /// is 1 (the configurations from before KV data parallelism keep their
    /// inputs).
    fn seed(&self) -> u64 {
        let name = self.name();
        seed_of(if self.kvdp == 1 { name.replace(", kvdp: 1 }", " }") } else { name }.as_str())
    }

    /// The inputs of the whole model: under KV data parallelism every rank's
    /// query heads (`nq · kvdp`) and every batch's caches.
    fn inputs(&self) -> Inputs {
        let seed = self.seed();
        let (b, s, h, d, nq) = (self.b, self.s, self.h, self.d, self.nq_attn());
        let i = d * (nq + 2);
        let ha = self.ha.unwrap_or(h);
        // The padded columns of X are zero, as a caller pads them.
        let mut x = uniform(b * s * h, seed, -1.0, 1.0);
        for (k, v) in x.iter_mut().enumerate() {
            if k % h >= ha {
                *v = 0.0;
            }
        }
        let pos: Vec<usize> = (0..b).map(|bi| (bi * 3 + self.split() / 4 * 3) % self.split()).collect();
        let mut mask = vec![0.0; self.s_ctx * b * nq * s];
        for (bi, &p) in pos.iter().enumerate() {
            for hd in 0..nq {
                for t in 0..s {
                    for j in 0..self.s_ctx {
                        let visible = if j < self.split() { j < p } else { j - self.split() <= t };
                        mask[((j * b + bi) * nq + hd) * s + t] = f64::from(u8::from(visible));
                    }
                }
            }
        }
        let w = |n: usize, k: u64, fan_in: usize| -> Vec<f64> {
            let a = (3.0 / fan_in as f64).sqrt();
            uniform(n, seed + k, -a, a)
        };
        let mut inputs = Inputs {
            x,
            gamma: uniform(h, seed + 1, 0.5, 1.5),
            w_qkv: w(h * i, 2, ha),
            bias_qkv: uniform(i, seed + 3, -0.1, 0.1),
            qk_gammas: [0, 1, 2, 3].map(|k| uniform(d, seed + 4 + k, 0.5, 1.5)),
            cos: uniform(d / 2 * b * s, seed + 8, -1.0, 1.0),
            sin: uniform(d / 2 * b * s, seed + 9, -1.0, 1.0),
            k_cache: self.cache_values(uniform(b * self.s_max * d, seed + 10, -1.0, 1.0)),
            v_cache: self.cache_values(uniform(b * self.s_max * d, seed + 11, -1.0, 1.0)),
            mask,
            sink: uniform(nq, seed + 12, -1.0, 2.0),
            table: self.block_table(seed + 15),
            pos,
            idx: Vec::new(),
            w_out: w(nq * d * h, 13, nq * d),
            bias_out: uniform(h, seed + 14, -0.1, 0.1),
        };
        inputs.idx = self.update_idx(&inputs);
        inputs
    }

    /// `[B·S, I]`: the projection of the (normalised) rows.
    fn projection(&self, x: &Inputs) -> Vec<f64> {
        let (h, i) = (self.h, self.i());
        let ha = self.ha.unwrap_or(h) as f64;
        let mut qkv = vec![0.0; self.bxs() * i];
        for t in 0..self.bxs() {
            let row = &x.x[t * h..(t + 1) * h];
            let y: Vec<f64> = if self.norm_x {
                let r = 1.0 / (row.iter().map(|a| a * a).sum::<f64>() / ha + EPS_X).sqrt();
                row.iter().zip(&x.gamma).map(|(a, g)| a * g * r).collect()
            } else {
                row.to_vec()
            };
            for c in 0..i {
                let dot: f64 = (0..h).map(|k| y[k] * x.w_qkv[k * i + c]).sum();
                qkv[t * i + c] = dot + if self.bias { x.bias_qkv[c] } else { 0.0 };
            }
        }
        qkv
    }

    /// One head vector of token `(b, t)` after the norms and RoPE.
    fn process(&self, x: &Inputs, mut v: Vec<f64>, b: usize, t: usize, is_q: bool) -> Vec<f64> {
        let (d, g) = (self.d, usize::from(!is_q));
        if self.qk_pre {
            rms(&mut v, EPS_QK, self.qk_pre_gamma.then_some(&x.qk_gammas[g][..]));
        }
        if self.rope {
            let half = d / 2;
            let mut r = v.clone();
            for p in 0..half {
                let (c, s) = (x.cos[(p * self.b + b) * self.s + t], x.sin[(p * self.b + b) * self.s + t]);
                let (e, o) = if self.contiguous { (p, p + half) } else { (2 * p, 2 * p + 1) };
                r[e] = v[e] * c - v[o] * s;
                r[o] = v[o] * c + v[e] * s;
            }
            v = r;
        }
        if self.qk_post {
            rms(&mut v, EPS_QK, self.qk_post_gamma.then_some(&x.qk_gammas[2 + g][..]));
        }
        v
    }

    /// Key position `j` of batch `b` in the cache's layout.
    fn k_at(&self, x: &Inputs, b: usize, j: usize, e: usize) -> usize {
        if self.block_len > 0 {
            self.v_at(x, b, j, e)
        } else if self.k_tp {
            (b * self.d + e) * self.s_max + j
        } else {
            (b * self.s_max + j) * self.d + e
        }
    }

    /// Value position `j` of batch `b` in the cache's layout: a flat cache's
    /// row of the batch, or the slot of the block the table gives.
    fn v_at(&self, x: &Inputs, b: usize, j: usize, e: usize) -> usize {
        if self.block_len > 0 { self.slot(x, b, j) * self.d + e } else { (b * self.s_max + j) * self.d + e }
    }

    fn reference(&self, x: &Inputs, precision: Precision) -> Reference {
        let (b, s, d, nq, i, h) = (self.b, self.s, self.d, self.nq, self.i(), self.h);
        let qkv = self.projection(x);
        let scale = 1.0 / (d as f64).sqrt();
        let head = |t: usize, c0: usize| qkv[t * i + c0..t * i + c0 + d].to_vec();
        let k_new: Vec<Vec<f64>> = (0..b * s).map(|t| self.process(x, head(t, nq * d), t / s, t % s, false)).collect();
        let v_new: Vec<Vec<f64>> = (0..b * s).map(|t| head(t, (nq + 1) * d)).collect();
        let (k_new, v_new) = (self.kv_quantized(k_new, precision), self.kv_quantized(v_new, precision));
        // attn[b, h, t, :]
        let mut attn = vec![0.0; b * nq * s * d];
        for bi in 0..b {
            for hd in 0..nq {
                for t in 0..s {
                    let processed = self.process(x, head(bi * s + t, hd * d), bi, t, true);
                    if self.skip_attn {
                        attn[((bi * nq + hd) * s + t) * d..][..d].copy_from_slice(&processed);
                        continue;
                    }
                    let q: Vec<f64> = processed.iter().map(|a| a * scale).collect();
                    let mut logits = Vec::new();
                    let mut values = Vec::new();
                    for j in 0..self.s_ctx {
                        if x.mask[((j * b + bi) * nq + hd) * s + t] == 0.0 {
                            continue;
                        }
                        let (kv, vv): (Vec<f64>, Vec<f64>) = if j < self.split() {
                            (
                                (0..d).map(|e| x.k_cache[self.k_at(x, bi, j, e)]).collect(),
                                (0..d).map(|e| x.v_cache[self.v_at(x, bi, j, e)]).collect(),
                            )
                        } else {
                            let tt = bi * s + j - self.split();
                            (k_new[tt].clone(), v_new[tt].clone())
                        };
                        logits.push(q.iter().zip(&kv).map(|(a, c)| a * c).sum::<f64>());
                        values.push(vv);
                    }
                    let sink = if self.sink { Some(x.sink[hd]) } else { None };
                    let m = logits.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                    let den: f64 = logits.iter().chain(sink.as_ref()).map(|l| (l - m).exp()).sum();
                    let o = &mut attn[((bi * nq + hd) * s + t) * d..][..d];
                    for (l, vv) in logits.iter().zip(&values) {
                        for (oe, ve) in o.iter_mut().zip(vv) {
                            *oe += (l - m).exp() / den * ve;
                        }
                    }
                }
            }
        }
        let out = if !self.out_proj && self.skip_attn {
            // The queries [d, B·q_heads·S].
            let n = b * nq * s;
            (0..d * n).map(|k| attn[(k % n) * d + k / n]).collect()
        } else if !self.out_proj {
            // [B, q_heads, d, S]
            let mut o = vec![0.0; b * nq * d * s];
            for (k, a) in attn.iter().enumerate() {
                let (e, t, bh) = (k % d, (k / d) % s, k / (d * s));
                o[(bh * d + e) * s + t] = *a;
            }
            o
        } else {
            let mut o = vec![0.0; b * s * h];
            for bi in 0..b {
                for t in 0..s {
                    for c in 0..h {
                        let mut acc = if self.bias { x.bias_out[c] } else { 0.0 };
                        for hd in 0..nq {
                            for e in 0..d {
                                acc += attn[((bi * nq + hd) * s + t) * d + e] * x.w_out[(hd * d + e) * h + c];
                            }
                        }
                        o[(bi * s + t) * h + c] = acc;
                    }
                }
            }
            if self.transposed_out { self.transpose_out(&o) } else { o }
        };
        let (k, v) = if self.update && self.block_len > 0 {
            // The new tokens go to consecutive slots of the pool from the
            // batch's first; slots past the pool (a padding batch) are not written.
            let (mut k, mut v) = (x.k_cache.clone(), x.v_cache.clone());
            for bi in 0..b {
                for t in 0..s {
                    let Some(row) = self.update_slot(x, bi).map(|r| r + t).filter(|&r| r < b * self.s_ctx) else { continue };
                    k[row * d..][..d].copy_from_slice(&k_new[bi * s + t]);
                    v[row * d..][..d].copy_from_slice(&v_new[bi * s + t]);
                }
            }
            (k, v)
        } else if self.update {
            let (mut k, mut v) = (x.k_cache.clone(), x.v_cache.clone());
            for bi in 0..b {
                for t in 0..s {
                    let j = x.pos[bi] + t;
                    for e in 0..d {
                        k[self.k_at(x, bi, j, e)] = k_new[bi * s + t][e];
                        v[self.v_at(x, bi, j, e)] = v_new[bi * s + t][e];
                    }
                }
            }
            (k, v)
        } else {
            // K [d, B, S], V [B, 1, S, d]
            let k = (0..d * b * s).map(|k| k_new[k % (b * s)][k / (b * s)]).collect();
            (k, v_new.concat())
        };
        Reference { out, k, v }
    }

    /// `[B·S, H]` as `[128, lnc, H/lnc/128, B·S]`: column `(l·128 + p)·H2 + j` at `[p, l, j, t]`.
    fn transpose_out(&self, o: &[f64]) -> Vec<f64> {
        let (h, bxs, lnc) = (self.h, self.bxs(), self.lnc());
        let h2 = h / lnc / 128;
        let mut r = vec![0.0; h * bxs];
        for p in 0..128 {
            for l in 0..lnc {
                for j in 0..h2 {
                    for t in 0..bxs {
                        r[((p * lnc + l) * h2 + j) * bxs + t] = o[t * h + (l * 128 + p) * h2 + j];
                    }
                }
            }
        }
        r
    }

    /// The K cache a launch (a rank's) holds: its `B_attn` batches.
    fn k_shape(&self) -> Vec<usize> {
        if self.block_len > 0 {
            self.v_shape()
        } else if self.k_tp {
            vec![self.b_attn(), self.d, self.s_max]
        } else {
            vec![self.b_attn(), self.s_max, self.d]
        }
    }

    /// The V cache a launch (a rank's) holds: its `B_attn` batches, or their blocks.
    fn v_shape(&self) -> Vec<usize> {
        match (self.b_attn() * self.s_ctx).checked_div(self.block_len) {
            Some(blocks) => vec![blocks, self.block_len, self.d],
            None => vec![self.b_attn(), self.s_max, self.d],
        }
    }

    /// The arguments, by keyword (the library's names).
    fn kwargs(&self, x: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (b, s, h, d, nq, i) = (self.b, self.s, self.h, self.d, self.nq, self.i());
        let t = |shape: Vec<usize>, v: &[f64]| Arg::Tensor(shape, v.to_vec(), dtype);
        let opt = |on: bool, a: Arg| if on { a } else { Arg::None };
        let none = QuantizationType::NONE;
        let mut kw = vec![
            ("X", t(vec![b, s, h], &x.x)),
            ("X_hidden_dim_actual", self.ha.map_or(Arg::None, |v| Arg::Int(v as i64))),
            ("rmsnorm_X_enabled", Arg::Bool(self.norm_x)),
            ("rmsnorm_X_eps", Arg::Float(EPS_X)),
            ("rmsnorm_X_gamma", opt(self.norm_x, t(vec![1, h], &x.gamma))),
            ("W_qkv", t(vec![h, i], &x.w_qkv)),
            ("bias_qkv", opt(self.bias, t(vec![1, i], &x.bias_qkv))),
            ("quantization_type_qkv", Arg::Member(QuantizationType::CLASS, none.member())),
            ("weight_dequant_scale_qkv", Arg::None),
            ("input_dequant_scale_qkv", Arg::None),
            ("rmsnorm_QK_pre_rope_enabled", Arg::Bool(self.qk_pre)),
            ("rmsnorm_QK_pre_rope_eps", Arg::Float(EPS_QK)),
            ("rmsnorm_QK_pre_rope_W_Q", opt(self.qk_pre_gamma, t(vec![1, d], &x.qk_gammas[0]))),
            ("rmsnorm_QK_pre_rope_W_K", opt(self.qk_pre_gamma, t(vec![1, d], &x.qk_gammas[1]))),
            ("cos", opt(self.rope, t(vec![d / 2, b, s], &x.cos))),
            ("sin", opt(self.rope, t(vec![d / 2, b, s], &x.sin))),
            ("rope_contiguous_layout", Arg::Bool(self.contiguous)),
            ("rmsnorm_QK_post_rope_enabled", Arg::Bool(self.qk_post)),
            ("rmsnorm_QK_post_rope_eps", Arg::Float(EPS_QK)),
            ("rmsnorm_QK_post_rope_W_Q", opt(self.qk_post_gamma, t(vec![1, d], &x.qk_gammas[2]))),
            ("rmsnorm_QK_post_rope_W_K", opt(self.qk_post_gamma, t(vec![1, d], &x.qk_gammas[3]))),
            ("K_cache_transposed", Arg::Bool(self.k_tp)),
            ("active_blocks_table", opt(self.block_len > 0, Arg::Tensor(self.table_shape(), self.table_values(x), Dtype::U32))),
            ("K_cache", Arg::Tensor(self.k_shape(), x.k_cache.clone(), self.cache_dtype(dtype))),
            ("V_cache", Arg::Tensor(self.v_shape(), x.v_cache.clone(), self.cache_dtype(dtype))),
            ("attention_mask", Arg::Tensor(vec![self.s_ctx, self.b_attn(), self.nq_attn(), s], x.mask.clone(), Dtype::U8)),
            ("sink", opt(self.sink, Arg::Tensor(vec![self.nq_attn(), 1], x.sink.clone(), Dtype::F32))),
            ("update_cache", Arg::Bool(self.update)),
            ("kv_cache_update_idx", Arg::Tensor(vec![self.b_attn(), 1], x.idx.iter().map(|&p| p as f64).collect(), Dtype::U32)),
            ("W_out", opt(self.out_proj, t(vec![nq * d, h], &x.w_out))),
            ("bias_out", opt(self.out_proj && self.bias, t(vec![1, h], &x.bias_out))),
            ("quantization_type_out", Arg::Member(QuantizationType::CLASS, none.member())),
            ("weight_dequant_scale_out", Arg::None),
            ("input_dequant_scale_out", Arg::None),
            ("transposed_out", Arg::Bool(self.transposed_out)),
            ("out_in_sb", Arg::Bool(false)),
            ("skip_attention", Arg::Bool(self.skip_attn)),
            ("k_scale", self.kv_scale.map_or(Arg::None, |v| Arg::Tensor(vec![1, 1], vec![v], Dtype::F32))),
            ("v_scale", self.kv_scale.map_or(Arg::None, |v| Arg::Tensor(vec![128, 1], vec![v; 128], Dtype::F32))),
        ];
        if self.kvdp > 1 {
            kw.push(("KVDP", Arg::Int(self.kvdp as i64)));
            kw.push(("KVDP_replica_group", Arg::ReplicaGroup(vec![self.group()])));
        }
        kw
    }

    /// The emulator's outputs: the block's output, K and V.
    fn run(&self, x: &Inputs, dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
        let out = self.try_run(x, dtype, precision).unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        assert_eq!(out.len(), 3, "{}: outputs", self.name());
        out
    }

    /// The emulator's outputs, or its refusal.
    fn try_run(&self, x: &Inputs, dtype: Dtype, precision: Precision) -> Result<Vec<Vec<f32>>, String> {
        Ok(self.try_run_ranks(std::slice::from_ref(x), dtype, precision)?.swap_remove(0))
    }

    /// The emulator's outputs on every rank, rank `r` given `xs[r]` (one
    /// rank without KV data parallelism), or the launch's refusal.
    fn try_run_ranks(&self, xs: &[Inputs], dtype: Dtype, precision: Precision) -> Result<Vec<Vec<Vec<f32>>>, String> {
        let ts: Vec<KernelTensors> = xs.iter().map(|x| self.kernel_tensors(x, dtype)).collect();
        let launch = Launch::new().ranks(xs.len()).lnc(self.lnc()).precision(precision);
        let outs = launch.run_ranks(|ctx| self.call(&ts[ctx.rank()]).run(ctx)).map_err(|e| e.to_string())?;
        Ok(outs.iter().map(|out| out.0.iter().map(|o| o.to_f32_vec()).collect()).collect())
    }

    /// One launch's (rank's) input tensors, in the kernel's shapes.
    fn kernel_tensors(&self, x: &Inputs, dtype: Dtype) -> KernelTensors {
        let (b, s, h, d, nq, i) = (self.b, self.s, self.h, self.d, self.nq, self.i());
        let u32_tensor = |shape: &[usize], v: Vec<i64>| Tensor::from_i64(shape, &v, Dtype::U32).unwrap();
        KernelTensors {
            x: tensor(&[b, s, h], &x.x, dtype),
            gamma: tensor(&[1, h], &x.gamma, dtype),
            w_qkv: tensor(&[h, i], &x.w_qkv, dtype),
            bias_qkv: tensor(&[1, i], &x.bias_qkv, dtype),
            qk_gammas: x.qk_gammas.iter().map(|v| tensor(&[1, d], v, dtype)).collect(),
            cos: tensor(&[d / 2, b, s], &x.cos, dtype),
            sin: tensor(&[d / 2, b, s], &x.sin, dtype),
            k_cache: tensor(&self.k_shape(), &x.k_cache, self.cache_dtype(dtype)),
            v_cache: tensor(&self.v_shape(), &x.v_cache, self.cache_dtype(dtype)),
            table: (self.block_len > 0).then(|| u32_tensor(&self.table_shape(), x.table.iter().map(|&v| v as i64).collect())),
            k_scale: tensor(&[1, 1], &[self.kv_scale.unwrap_or(1.0)], Dtype::F32),
            v_scale: tensor(&[128, 1], &[self.kv_scale.unwrap_or(1.0); 128], Dtype::F32),
            mask: tensor(&[self.s_ctx, self.b_attn(), self.nq_attn(), s], &x.mask, Dtype::U8),
            sink: tensor(&[self.nq_attn(), 1], &x.sink, Dtype::F32),
            idx: u32_tensor(&[self.b_attn(), 1], x.idx.iter().map(|&p| p as i64).collect()),
            w_out: tensor(&[nq * d, h], &x.w_out, dtype),
            bias_out: tensor(&[1, h], &x.bias_out, dtype),
        }
    }

    /// The kernel's call on `t`, with this configuration's options.
    fn call<'a>(&self, t: &'a KernelTensors) -> attention_block_tkg::Call<'a> {
        let none = QuantizationType::NONE;
        let mut call = attention_block_tkg::Call::new(
            &t.x,
            self.norm_x,
            &t.w_qkv,
            none,
            self.qk_pre,
            EPS_QK,
            self.contiguous,
            self.qk_post,
            EPS_QK,
            self.k_tp,
            &t.k_cache,
            &t.v_cache,
            &t.mask,
            self.update,
            none,
            self.transposed_out,
            false,
        )
        .rmsnorm_X_eps(EPS_X)
        .skip_attention(self.skip_attn)
        .kv_cache_update_idx(&t.idx);
        if let Some(ha) = self.ha {
            call = call.X_hidden_dim_actual(ha as i64);
        }
        if self.norm_x {
            call = call.rmsnorm_X_gamma(&t.gamma);
        }
        if self.bias {
            call = call.bias_qkv(&t.bias_qkv);
        }
        if self.qk_pre_gamma {
            call = call.rmsnorm_QK_pre_rope_W_Q(&t.qk_gammas[0]).rmsnorm_QK_pre_rope_W_K(&t.qk_gammas[1]);
        }
        if self.qk_post_gamma {
            call = call.rmsnorm_QK_post_rope_W_Q(&t.qk_gammas[2]).rmsnorm_QK_post_rope_W_K(&t.qk_gammas[3]);
        }
        if self.rope {
            call = call.cos(&t.cos).sin(&t.sin);
        }
        if self.sink {
            call = call.sink(&t.sink);
        }
        if let Some(table) = &t.table {
            call = call.active_blocks_table(table);
        }
        if self.kv_scale.is_some() {
            call = call.k_scale(&t.k_scale).v_scale(&t.v_scale);
        }
        if self.out_proj {
            call = call.W_out(&t.w_out);
            if self.bias {
                call = call.bias_out(&t.bias_out);
            }
        }
        if self.kvdp > 1 {
            call = call.KVDP(self.kvdp as i64).KVDP_replica_group(ReplicaGroup::new(vec![self.group()]));
        }
        call
    }

    fn with_qk_pre(mut self) -> Self {
        self.qk_pre = true;
        self
    }

    /// The emulator's refusal of this configuration.
    fn run_err(&self, x: &Inputs) -> String {
        match self.try_run(x, Dtype::Bf16, Precision::Hardware) {
            Ok(_) => panic!("{}: accepted", self.name()),
            Err(e) => e,
        }
    }

    fn check(&self, dtype: Dtype, precision: Precision, tol: f64) {
        let x = rounded(self.inputs(), dtype);
        let want = self.reference(&x, precision);
        let got = self.run(&x, dtype, precision);
        let what = format!("{} {dtype:?} {precision:?}", self.name());
        assert_close(&format!("{what} out"), &got[0], &want.out, tol, tol);
        let kv_tol = self.kv_tol(precision, tol);
        assert_close(&format!("{what} K"), &got[1], &want.k, kv_tol, kv_tol);
        assert_close(&format!("{what} V"), &got[2], &want.v, kv_tol, kv_tol);
    }
}

/// The inputs rounded to `dtype` (the mask, sink and positions as they are).
fn rounded(x: Inputs, dtype: Dtype) -> Inputs {
    let r = |v: &[f64]| as_dtype(v, dtype);
    Inputs {
        x: r(&x.x),
        gamma: r(&x.gamma),
        w_qkv: r(&x.w_qkv),
        bias_qkv: r(&x.bias_qkv),
        qk_gammas: x.qk_gammas.map(|g| r(&g)),
        cos: r(&x.cos),
        sin: r(&x.sin),
        k_cache: r(&x.k_cache),
        v_cache: r(&x.v_cache),
        sink: as_dtype(&x.sink, Dtype::F32),
        w_out: r(&x.w_out),
        bias_out: r(&x.bias_out),
        ..x
    }
}

/// Every configuration, fp32 inputs in fp32 precision.
#[test]
fn configs_in_fp32_match_float64() {
    check_fp32(CONFIGS);
}

/// bfloat16 and float16 inputs in hardware precision against the float64
/// block of the rounded inputs.
#[test]
fn configs_in_hardware_precision_match_float64() {
    check_hardware(CONFIGS);
}

/// The emitted kernel under NumPy equals the emulator up to the order of the
/// matmuls' float32 sums.
#[test]
fn emitted_attention_block_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([CONFIGS[1], CONFIGS[4], CONFIGS[9], CONFIGS[10], CONFIGS[11], CONFIGS[12], CONFIGS[13]]) {
        cfg.assert_numpy_equals_emulator(m);
    }
}

/// A call the rules accept (the library's first HBM row), to vary one field at a time.
const OK: AttnBlockCall = AttnBlockCall::new(4, 1, 6144, 64, 8, 11264);

/// Each rule refuses what it names, and the kernel refuses the same when traced.
#[test]
fn rules_refuse_what_they_name() {
    assert_eq!(attn_block_violation(OK), None);
    assert_eq!(attn_block_violation(AttnBlockCall { block_len: 16, ..OK }), None);
    assert_eq!(
        attn_block_violation(AttnBlockCall {
            d_head: 128,
            qk_norm: true,
            block_len: 16,
            update_cache: false,
            s_ctx: 1024,
            s_max_ctx: 1024,
            ..OK
        }),
        None
    );
    let cases = [
        (AttnBlockCall { out_in_sb: true, ..OK }, AttnBlockRule::OutInSb),
        (AttnBlockCall { kvdp: 2, ..OK }, AttnBlockRule::KvdpGroup),
        (AttnBlockCall { kvdp: 3, has_replica_group: true, ..OK }, AttnBlockRule::KvdpBatch),
        (AttnBlockCall { has_k_scale: true, ..OK }, AttnBlockRule::KvScales),
        (AttnBlockCall { has_k_scale: true, has_v_scale: true, ..OK }, AttnBlockRule::KvQuantCache),
        (AttnBlockCall { has_w_out: false, transposed_out: true, ..OK }, AttnBlockRule::TransposedOut),
        (AttnBlockCall { has_sin: false, ..OK }, AttnBlockRule::RopeTables),
        (AttnBlockCall { has_update_idx: false, ..OK }, AttnBlockRule::Update),
        (AttnBlockCall { h: 6000, ..OK }, AttnBlockRule::Hidden),
        (AttnBlockCall { b: 129, skip_attention: true, ..OK }, AttnBlockRule::SkipAttentionTiles),
        (AttnBlockCall { d_head: 63, ..OK }, AttnBlockRule::Heads),
        (AttnBlockCall { block_len: 16, update_cache: false, k_cache_transposed: true, ..OK }, AttnBlockRule::BlockTransposed),
        (AttnBlockCall { qk_norm: true, ..OK }, AttnBlockRule::QkNormHead),
        (AttnBlockCall { d_head: 96, ..OK }, AttnBlockRule::RopeHead),
        (AttnBlockCall { s_ctx: 11200, s_max_ctx: 11264, ..OK }, AttnBlockRule::Attention(TkgRule::SpriorTiles)),
        (AttnBlockCall { s_tkg: 129, ..OK }, AttnBlockRule::Attention(TkgRule::ColumnsFit)),
    ];
    // More query columns than partitions (8 heads of 17 tokens) run a group of heads at a time.
    assert_eq!(attn_block_violation(AttnBlockCall { s_tkg: 17, ..OK }), None);
    for (call, rule) in cases {
        assert_eq!(attn_block_violation(call), Some(rule), "{call:?}");
        assert!(!rule.message().is_empty());
    }
    // The kernel's own checks, when traced, with the rules' messages.
    let c = CONFIGS[0];
    let x = rounded(c.inputs(), Dtype::Bf16);
    let kw = c.kwargs(&x, Dtype::Bf16);
    let with = |key: &'static str, arg: Arg| -> Vec<(&'static str, Arg)> {
        let mut kw: Vec<_> = kw.iter().filter(|(k, _)| *k != key).cloned().collect();
        kw.push((key, arg));
        kw
    };
    let refuse = |kw: &[(&'static str, Arg)], rule: AttnBlockRule| {
        let err = crate::common::attention::run_numpy_refused(emitted_package(), "attention_block_tkg", &[], kw);
        assert!(err.contains(rule.message()), "{err}");
    };
    refuse(&with("out_in_sb", Arg::Bool(true)), AttnBlockRule::OutInSb);
    refuse(&with("KVDP", Arg::Int(2)), AttnBlockRule::KvdpGroup);
    refuse(&with("rmsnorm_QK_pre_rope_enabled", Arg::Bool(true)), AttnBlockRule::QkNormHead);
    let err = c.with_qk_pre().run_err(&x);
    assert!(err.contains(AttnBlockRule::QkNormHead.message()), "{err}");
}

/// CI-sized versions of the library's large-batch rows (`B·S_tkg > 128`: its
/// batch, heads, head dim, new tokens and options; `H` and the caches
/// smaller), a last tile of fewer batches (255 batches of 3 tokens: tiles of
/// 42), one program, and the new K/V returned without the projection.
const LARGE_BATCH: &[Config] = &[
    cfg(255, 2, 128, 256, 128, 3).qk_pre(false).qk_post(true).bias(),
    cfg(255, 2, 64, 256, 128, 3).k_tp(),
    cfg(384, 3, 128, 256, 128, 1).qk_post(true).transposed_out(),
    cfg(130, 1, 64, 256, 128, 1).lnc1().k_tp().no_norm_x(),
    cfg(200, 2, 64, 256, 128, 1).interleaved().no_update().no_proj(),
];

/// The large-batch rows, fp32 inputs in fp32 precision.
#[test]
fn large_batch_in_fp32_matches_float64() {
    check_fp32(LARGE_BATCH);
}

/// The large-batch rows, bfloat16 and float16 inputs in hardware precision.
#[test]
fn large_batch_in_hardware_precision_matches_float64() {
    check_hardware(LARGE_BATCH);
}

/// The emitted kernel under NumPy equals the emulator on large batches.
#[test]
fn emitted_large_batch_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([LARGE_BATCH[0], LARGE_BATCH[3], LARGE_BATCH[4]]) {
        cfg.assert_numpy_equals_emulator(m);
    }
}

/// `skip_attention` takes one tile of token rows: refused beyond it, by the
/// emulator and by the emitted kernel, with the rule's message.
#[test]
fn skip_attention_beyond_one_tile_is_refused() {
    let c = cfg(130, 1, 64, 256, 128, 1).skip_attention();
    let x = rounded(c.inputs(), Dtype::Bf16);
    let want = AttnBlockRule::SkipAttentionTiles.message();
    let err = c.run_err(&x);
    assert!(err.contains(want), "{err}");
    let err = crate::common::attention::run_numpy_refused(emitted_package(), "attention_block_tkg", &[], &c.kwargs(&x, Dtype::Bf16));
    assert!(err.contains(want), "{err}");
}

impl Config {
    /// The emitted kernel under NumPy equals the emulator up to the order of
    /// the matmuls' float32 sums, in precision mode `m`.
    fn assert_numpy_equals_emulator(&self, m: Mode) {
        // The attention refuses float32 queries with an fp8 cache.
        let (dtype, precision, mode) = m.run(self.fp32_inputs(), Dtype::Bf16);
        let x = rounded(self.inputs(), dtype);
        let emu = self.run(&x, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), "attention_block_tkg", &[], &self.kwargs(&x, dtype), self.lnc(), mode);
        assert_numpy_close_to_emulator(&self.name(), mode, &np, &emu);
    }

    /// The inputs' dtype in fp32 mode: bfloat16 with an fp8 cache, which the
    /// attention refuses float32 queries with.
    fn fp32_inputs(&self) -> Dtype {
        if self.kv_scale.is_some() { Dtype::Bf16 } else { Dtype::F32 }
    }
}

/// Each configuration, fp32 inputs in fp32 precision, against float64.
fn check_fp32(configs: &[Config]) {
    for cfg in configs {
        cfg.check(Dtype::F32, Precision::Fp32, 1e-4);
    }
}

/// Each configuration, bfloat16 and float16 inputs by turns in hardware
/// precision, against the float64 block of the rounded inputs.
fn check_hardware(configs: &[Config]) {
    for (n, cfg) in configs.iter().enumerate() {
        let dtype = if n % 2 == 0 { Dtype::Bf16 } else { Dtype::F16 };
        cfg.check(dtype, Precision::Hardware, 3e-2);
    }
}

impl Config {
    /// fp8 KV-cache quantization with this scale (`k_scale` `[1, 1]`, `v_scale` `[128, 1]`).
    const fn kv_quant(mut self, scale: f64) -> Self {
        self.kv_scale = Some(scale);
        self
    }

    /// The caches' dtype: `float8_e4m3` with KV quantization.
    fn cache_dtype(&self, dtype: Dtype) -> Dtype {
        if self.kv_scale.is_some() { Dtype::Fp8E4m3 } else { dtype }
    }

    /// Cache values, on the fp8 grid with KV quantization.
    fn cache_values(&self, v: Vec<f64>) -> Vec<f64> {
        if self.kv_scale.is_some() { as_dtype(&v, Dtype::Fp8E4m3) } else { v }
    }

    /// New keys or values as the caches hold them with KV quantization:
    /// times the scale, clipped to ±240 and rounded to fp8 (in fp32
    /// precision the emulator keeps written values unrounded).
    fn kv_quantized(&self, rows: Vec<Vec<f64>>, precision: Precision) -> Vec<Vec<f64>> {
        let Some(sc) = self.kv_scale else { return rows };
        let quantize = |r: &Vec<f64>| -> Vec<f64> {
            let clipped: Vec<f64> = r.iter().map(|v| (v * sc).clamp(-240.0, 240.0)).collect();
            if precision == Precision::Hardware { as_dtype(&clipped, Dtype::Fp8E4m3) } else { clipped }
        };
        rows.iter().map(quantize).collect()
    }

    /// The K/V tolerance: in hardware precision an fp8 rounding of a value
    /// a bfloat16 step away from the float64 one may land one fp8 step
    /// (2^-3 relative) away.
    fn kv_tol(&self, precision: Precision, tol: f64) -> f64 {
        if self.kv_scale.is_some() && precision == Precision::Hardware { 0.13 } else { tol }
    }
}

/// CI-sized versions of the library's fp8 KV-cache rows (its batch, heads,
/// head dim, new tokens and options; `H` and the caches smaller; direct
/// casts and power-of-two scales), beyond one tile, without the cache
/// update, with several new tokens and on one program.
const KV_QUANT: &[Config] = &[
    cfg(2, 1, 128, 512, 256, 1).no_norm_x().qk_pre(true).kv_quant(1.0),
    cfg(37, 1, 128, 256, 256, 1).k_tp().no_norm_x().kv_quant(1.0),
    cfg(32, 1, 128, 256, 256, 1).no_norm_x().kv_quant(2.0),
    cfg(384, 3, 64, 256, 128, 1).k_tp().no_norm_x().kv_quant(1.0),
    cfg(8, 1, 64, 256, 128, 1).no_update().bias().kv_quant(0.5),
    cfg(4, 2, 64, 256, 256, 5).lnc1().kv_quant(1.0),
    cfg(16, 1, 128, 256, 256, 1).no_norm_x().block(16).kv_quant(2.0),
];

/// The fp8 KV-cache rows in fp32 precision (bfloat16 inputs: the attention
/// refuses float32 queries with an fp8 cache).
#[test]
fn kv_quant_in_fp32_matches_float64() {
    for cfg in KV_QUANT {
        cfg.check(Dtype::Bf16, Precision::Fp32, 1e-4);
    }
}

/// The fp8 KV-cache rows, bfloat16 and float16 inputs in hardware precision.
#[test]
fn kv_quant_in_hardware_precision_matches_float64() {
    check_hardware(KV_QUANT);
}

/// The emitted kernel under NumPy equals the emulator with fp8 KV caches.
#[test]
fn emitted_kv_quant_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([KV_QUANT[1], KV_QUANT[4], KV_QUANT[5]]) {
        cfg.assert_numpy_equals_emulator(m);
    }
}

/// The kernel refuses a lone KV scale and scales with caches not in fp8,
/// with the rules' messages, and the rules accept the fp8 rows.
#[test]
fn kv_quant_rules_refuse_what_they_name() {
    let fp8 = AttnBlockCall { has_k_scale: true, has_v_scale: true, fp8_cache: true, ..OK };
    assert_eq!(attn_block_violation(fp8), None);
    let c = KV_QUANT[1];
    let x = rounded(c.inputs(), Dtype::Bf16);
    let kw = c.kwargs(&x, Dtype::Bf16);
    let refuse = |kw: Vec<(&'static str, Arg)>, rule: AttnBlockRule| {
        let err = crate::common::attention::run_numpy_refused(emitted_package(), "attention_block_tkg", &[], &kw);
        assert!(err.contains(rule.message()), "{err}");
    };
    let lone: Vec<_> = kw.iter().filter(|(k, _)| *k != "v_scale").cloned().collect();
    refuse(lone, AttnBlockRule::KvScales);
    let wide = cfg(37, 1, 128, 256, 256, 1).k_tp().no_norm_x();
    let mut kw = wide.kwargs(&rounded(wide.inputs(), Dtype::Bf16), Dtype::Bf16);
    kw.retain(|(k, _)| *k != "k_scale" && *k != "v_scale");
    kw.push(("k_scale", Arg::Tensor(vec![1, 1], vec![1.0], Dtype::F32)));
    kw.push(("v_scale", Arg::Tensor(vec![1, 1], vec![1.0], Dtype::F32)));
    refuse(kw, AttnBlockRule::KvQuantCache);
}

impl Config {
    /// A block cache of blocks of `block_len` positions (`S_max = S_ctx`).
    const fn block(mut self, block_len: usize) -> Self {
        self.block_len = block_len;
        self
    }

    fn table_shape(&self) -> Vec<usize> {
        vec![self.b_attn(), self.s_ctx / self.block_len.max(1)]
    }

    fn table_values(&self, x: &Inputs) -> Vec<f64> {
        x.table.iter().map(|&v| v as f64).collect()
    }

    /// A block table of distinct blocks of the pool in a shuffled order
    /// (empty for a flat cache).
    fn block_table(&self, seed: u64) -> Vec<usize> {
        if self.block_len == 0 {
            return Vec::new();
        }
        let n = self.b * self.s_ctx / self.block_len;
        let keys = uniform(n, seed, 0.0, 1.0);
        let mut order: Vec<usize> = (0..n).collect();
        // Under KV data parallelism each rank's batches read blocks of its own
        // part of the pool (rank r's pool is the r-th part), shuffled within it.
        let part = n / self.kvdp;
        order.sort_by(|&a, &c| (a / part).cmp(&(c / part)).then(keys[a].total_cmp(&keys[c])));
        order
    }

    /// The pool slot of batch `b`'s position `j`: its block (from the table) times `block_len`, plus the offset.
    fn slot(&self, x: &Inputs, b: usize, j: usize) -> usize {
        let per_batch = self.s_ctx / self.block_len;
        x.table[b * per_batch + j / self.block_len] * self.block_len + j % self.block_len
    }

    /// Batch `b`'s first write slot of a block cache; `None` for the last of
    /// several batches, a padding batch (the library's tests mark it so).
    fn update_slot(&self, x: &Inputs, b: usize) -> Option<usize> {
        (self.b == 1 || b + 1 < self.b).then(|| self.slot(x, b, x.pos[b]))
    }

    /// `kv_cache_update_idx`: positions of a flat cache, slots of a block
    /// cache (`uint32` max for the padding batch).
    fn update_idx(&self, x: &Inputs) -> Vec<u64> {
        if self.block_len == 0 {
            return x.pos.iter().map(|&p| p as u64).collect();
        }
        (0..self.b).map(|b| self.update_slot(x, b).map_or(u64::from(u32::MAX), |v| v as u64)).collect()
    }
}

/// CI-sized versions of the library's block-cache rows (its batch, heads,
/// head dim, new tokens, block lengths and options; `H` and the caches
/// smaller): tokens written across a block's end, more than one tile of
/// batches, one program, and the new K/V returned.
const BLOCK: &[Config] = &[
    cfg(4, 1, 128, 512, 256, 5).block(16),
    cfg(16, 1, 128, 512, 256, 1).block(32).qk_pre(true).transposed_out(),
    cfg(64, 8, 64, 256, 128, 1).ha(224).block(32),
    cfg(130, 2, 64, 256, 128, 1).block(32).lnc1().bias(),
    cfg(4, 2, 64, 256, 256, 3).block(16).no_update(),
];

/// The block-cache rows, fp32 inputs in fp32 precision.
#[test]
fn block_cache_in_fp32_matches_float64() {
    check_fp32(BLOCK);
}

/// The block-cache rows, bfloat16 and float16 inputs in hardware precision.
#[test]
fn block_cache_in_hardware_precision_matches_float64() {
    check_hardware(BLOCK);
}

/// The emitted kernel under NumPy equals the emulator with block caches.
#[test]
fn emitted_block_cache_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([BLOCK[0], BLOCK[3], KV_QUANT[6]]) {
        cfg.assert_numpy_equals_emulator(m);
    }
}

impl Config {
    /// KV data parallelism over `kvdp` ranks (`nq` query heads each).
    const fn kvdp(mut self, kvdp: usize) -> Self {
        self.kvdp = kvdp;
        self
    }

    /// The batches a launch (a rank) attends: `B / KVDP`.
    fn b_attn(&self) -> usize {
        self.b / self.kvdp
    }

    /// The heads the attention takes: every rank's, `q_heads · KVDP`.
    fn nq_attn(&self) -> usize {
        self.nq * self.kvdp
    }

    /// The replica group: ranks `0 .. KVDP` (the library's tests use this one).
    fn group(&self) -> Vec<i64> {
        (0..self.kvdp as i64).collect()
    }

    /// The blocks of a rank's part of a block pool.
    fn blocks_per_rank(&self) -> usize {
        self.b_attn() * self.s_ctx / self.block_len
    }

    /// Rank `r` as a block without data parallelism sees it: all `B`
    /// batches and the whole caches, its own `nq` query heads (its columns
    /// of `W_qkv` and rows of `W_out`, their mask and sink) and the shared
    /// K/V head. Its float64 reference is what rank `r` must return (the
    /// caches restricted to its batches).
    fn rank_view(&self, g: &Inputs, r: usize) -> (Config, Inputs) {
        let (s, d, nq, nqa) = (self.s, self.d, self.nq, self.nq_attn());
        let (ig, i) = (d * (nqa + 2), d * (nq + 2));
        // This rank's query columns, then the K and V columns every rank shares.
        let cols = |row: &[f64]| -> Vec<f64> { row[r * nq * d..(r + 1) * nq * d].iter().chain(&row[nqa * d..]).copied().collect() };
        let w_qkv = g.w_qkv.chunks(ig).flat_map(cols).collect::<Vec<_>>();
        let heads = nq * s;
        let mask = g.mask.chunks(nqa * s).flat_map(|m| m[r * heads..(r + 1) * heads].to_vec()).collect();
        let x = Inputs {
            w_qkv,
            bias_qkv: cols(&g.bias_qkv),
            mask,
            sink: g.sink[r * nq..(r + 1) * nq].to_vec(),
            w_out: g.w_out[r * nq * d * self.h..(r + 1) * nq * d * self.h].to_vec(),
            ..g.clone()
        };
        assert_eq!(x.w_qkv.len(), self.h * i);
        (Config { kvdp: 1, ..*self }, x)
    }

    /// Rank `r`'s kernel inputs: its own query projection and output
    /// projection (as in [`rank_view`](Config::rank_view)), the caches,
    /// table and write positions of its `B / KVDP` batches (a block pool's
    /// `r`-th part, its blocks and slots renumbered from 0), and the mask of
    /// its batches over every rank's heads.
    fn rank_inputs(&self, g: &Inputs, r: usize) -> Inputs {
        let (ba, s, nqa) = (self.b_attn(), self.s, self.nq_attn());
        let (_, view) = self.rank_view(g, r);
        let cache = |c: &[f64]| {
            let n = c.len() / self.kvdp;
            c[r * n..(r + 1) * n].to_vec()
        };
        let per_batch = self.s_ctx / self.block_len.max(1);
        let (first_block, rows) = if self.block_len > 0 { (r * self.blocks_per_rank(), ba * per_batch) } else { (0, 0) };
        let row = ba * nqa * s;
        Inputs {
            k_cache: cache(&g.k_cache),
            v_cache: cache(&g.v_cache),
            mask: g.mask.chunks(self.b * nqa * s).flat_map(|m| m[r * row..(r + 1) * row].to_vec()).collect(),
            sink: g.sink.clone(),
            pos: g.pos[r * ba..(r + 1) * ba].to_vec(),
            table: if self.block_len > 0 {
                g.table[r * rows..(r + 1) * rows].iter().map(|&t| t - first_block).collect()
            } else {
                Vec::new()
            },
            idx: g.idx[r * ba..(r + 1) * ba]
                .iter()
                .map(|&i| if self.block_len > 0 && i != u64::from(u32::MAX) { i - (first_block * self.block_len) as u64 } else { i })
                .collect(),
            ..view
        }
    }

    /// The float64 reference of rank `r`: the block without data
    /// parallelism on [`rank_view`](Config::rank_view)'s inputs, its caches
    /// (or new K and V) restricted to the rank's batches, the output without
    /// a projection in the gathered layout `[d, B·q_heads·S]` the library returns.
    fn rank_reference(&self, g: &Inputs, r: usize, precision: Precision) -> Reference {
        let (view_cfg, view) = self.rank_view(g, r);
        let want = view_cfg.reference(&view, precision);
        let (b, ba, s, d, nq) = (self.b, self.b_attn(), self.s, self.d, self.nq);
        let part = |v: &[f64]| {
            let n = v.len() / self.kvdp;
            v[r * n..(r + 1) * n].to_vec()
        };
        let (k, v) = if self.update {
            (part(&want.k), part(&want.v))
        } else {
            // K [d, B, S]: each row's columns of the rank's batches.
            let k = want.k.chunks(b * s).flat_map(|row| row[r * ba * s..(r + 1) * ba * s].to_vec()).collect();
            (k, part(&want.v))
        };
        let out = if !self.out_proj && !self.skip_attn {
            // [B, q_heads, d, S] -> [d, B·q_heads·S]
            let n = b * nq * s;
            (0..d * n).map(|k| want.out[((k % n) / s * d + k / n) * s + k % s]).collect()
        } else {
            want.out
        };
        Reference { out, k, v }
    }

    /// Every rank's outputs against its float64 reference.
    fn check_kvdp(&self, dtype: Dtype, precision: Precision, tol: f64) {
        let g = rounded(self.inputs(), dtype);
        let xs: Vec<Inputs> = (0..self.kvdp).map(|r| self.rank_inputs(&g, r)).collect();
        let got = self.try_run_ranks(&xs, dtype, precision).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        let kv_tol = self.kv_tol(precision, tol);
        for (r, got) in got.iter().enumerate() {
            let want = self.rank_reference(&g, r, precision);
            let what = format!("{} rank {r} {dtype:?} {precision:?}", self.name());
            assert_close(&format!("{what} out"), &got[0], &want.out, tol, tol);
            assert_close(&format!("{what} K"), &got[1], &want.k, kv_tol, kv_tol);
            assert_close(&format!("{what} V"), &got[2], &want.v, kv_tol, kv_tol);
        }
    }

    /// The emitted kernel under NumPy, every rank, equals the emulator in
    /// precision mode `m`.
    fn assert_kvdp_numpy_equals_emulator(&self, m: Mode) {
        let (dtype, precision, mode) = m.run(self.fp32_inputs(), Dtype::Bf16);
        let g = rounded(self.inputs(), dtype);
        let xs: Vec<Inputs> = (0..self.kvdp).map(|r| self.rank_inputs(&g, r)).collect();
        let emu = self.try_run_ranks(&xs, dtype, precision).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        let ranks: Vec<_> = xs.iter().map(|x| (Vec::new(), self.kwargs(x, dtype))).collect();
        let np = run_numpy_kwargs_ranks(emitted_package(), "attention_block_tkg", &ranks, self.lnc(), mode);
        for (r, (np, emu)) in np.iter().zip(&emu).enumerate() {
            assert_numpy_close_to_emulator(&format!("{} rank {r}", self.name()), mode, np, emu);
        }
    }
}

/// KV data parallelism on CI-sized versions of the library's KVDP rows
/// (`q_heads` per rank, a flat or a block cache): two ranks of two heads, four
/// ranks of one head (one batch each, the single-head gather), a block cache
/// with a padding batch and the Q/K RMSNorm on one program, fp8 KV caches
/// with a transposed K cache, and the attention skipped.
const KVDP: &[Config] = &[
    cfg(4, 2, 64, 256, 128, 1).kvdp(2).bias(),
    cfg(4, 1, 64, 256, 128, 2).kvdp(4).no_update().no_proj().sink(),
    cfg(8, 2, 128, 256, 128, 1).kvdp(2).block(16).qk_pre(true).lnc1(),
    cfg(4, 1, 128, 256, 128, 1).kvdp(2).k_tp().no_norm_x().kv_quant(1.0),
    cfg(2, 2, 64, 256, 128, 1).kvdp(2).skip_attention().no_proj(),
];

/// Every rank of the KVDP rows equals the float64 block without data
/// parallelism on its inputs: fp32 inputs in fp32 precision (bfloat16 with
/// fp8 caches).
#[test]
fn kvdp_in_fp32_matches_float64_on_every_rank() {
    for cfg in KVDP {
        let dtype = if cfg.kv_scale.is_some() { Dtype::Bf16 } else { Dtype::F32 };
        cfg.check_kvdp(dtype, Precision::Fp32, 1e-4);
    }
}

/// The KVDP rows, bfloat16 and float16 inputs by turns in hardware precision.
#[test]
fn kvdp_in_hardware_precision_matches_float64_on_every_rank() {
    for (n, cfg) in KVDP.iter().enumerate() {
        let dtype = if n % 2 == 0 { Dtype::Bf16 } else { Dtype::F16 };
        cfg.check_kvdp(dtype, Precision::Hardware, 3e-2);
    }
}

/// The emitted kernel under NumPy with ranks equals the emulator under KV
/// data parallelism.
#[test]
fn emitted_kvdp_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([KVDP[0], KVDP[1], KVDP[2]]) {
        cfg.assert_kvdp_numpy_equals_emulator(m);
    }
}

/// KV data parallelism's rules: the replica group required, `B` a multiple
/// of `KVDP`, and the attention's rules on `B / KVDP` batches of `q_heads ·
/// KVDP` heads; refused by the rules, the emulator and the emitted kernel
/// with the same messages.
#[test]
fn kvdp_rules_refuse_what_they_name() {
    let kvdp = AttnBlockCall { kvdp: 2, has_replica_group: true, ..OK };
    assert_eq!(attn_block_violation(kvdp), None);
    assert_eq!(attn_block_violation(AttnBlockCall { s_tkg: 16, ..OK }), None);
    let cases = [
        (AttnBlockCall { has_replica_group: false, ..kvdp }, AttnBlockRule::KvdpGroup),
        (AttnBlockCall { b: 6, kvdp: 4, ..kvdp }, AttnBlockRule::KvdpBatch),
    ];
    // 16 new tokens of the 16 gathered heads: two groups of heads on the partitions.
    assert_eq!(attn_block_violation(AttnBlockCall { s_tkg: 16, ..kvdp }), None);
    for (call, rule) in cases {
        assert_eq!(attn_block_violation(call), Some(rule), "{call:?}");
    }
    // Rank 0's inputs of a two-rank row, with KVDP 3 (4 batches) or without the group.
    let c = KVDP[0];
    let x = c.rank_inputs(&rounded(c.inputs(), Dtype::Bf16), 0);
    let t = c.kernel_tensors(&x, Dtype::Bf16);
    let launch = Launch::new().lnc(c.lnc());
    let err = c.call(&t).KVDP(3).launch(&launch).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains(AttnBlockRule::KvdpBatch.message()), "{err}");
    let err = c.call(&t).KVDP_replica_group(None).launch(&launch).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains(AttnBlockRule::KvdpGroup.message()), "{err}");
    let mut kw = c.kwargs(&x, Dtype::Bf16);
    kw.retain(|(k, _)| *k != "KVDP");
    kw.push(("KVDP", Arg::Int(3)));
    let err = crate::common::attention::run_numpy_refused(emitted_package(), "attention_block_tkg", &[], &kw);
    assert!(err.contains(AttnBlockRule::KvdpBatch.message()), "{err}");
    kw.retain(|(k, _)| *k != "KVDP_replica_group");
    let err = crate::common::attention::run_numpy_refused(emitted_package(), "attention_block_tkg", &[], &kw);
    assert!(err.contains(AttnBlockRule::KvdpGroup.message()), "{err}");
}
