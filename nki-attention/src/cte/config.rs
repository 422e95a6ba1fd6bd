//! The typed configuration of `attention_cte`, whose rules are checked at compile
//! time when the configuration is a constant (see [`cte_config!`](crate::cte_config)).

use crate::scale::{is_finite_f32, keeps_masks};
use nki::Dtype;
use nki::hw::Generation;

/// Static shapes of an `attention_cte` call, when known at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CteDims {
    /// Query batch (`bs`, batch × heads).
    pub batch: i64,
    /// Key/value batch (`bs_kv`); `batch` must be a multiple of it (GQA).
    pub batch_kv: i64,
    /// Query sequence length.
    pub seqlen_q: i64,
    /// Active key/value sequence length.
    pub seqlen_kv: i64,
    /// Head dimension.
    pub head_dim: i64,
    /// Prior (prefix-cache) key/value length, 0 without prefix caching.
    pub seqlen_prior: i64,
}

/// Every flag of `attention_cte` and, optionally, its shapes.
///
/// Built with `const fn` setters so a configuration can be a constant; wrapped in
/// [`cte_config!`](crate::cte_config) its rules become compile errors:
///
/// ```compile_fail
/// use nki_attention::{cte_config, cte::CteConfig};
/// // Context parallelism needs the causal mask.
/// let cfg = cte_config!(CteConfig::new().causal_mask(false).context_parallel(4));
/// ```
///
/// ```
/// use nki_attention::{cte_config, cte::CteConfig};
/// let cfg = cte_config!(CteConfig::new().sliding_window(128).cache_softmax(true));
/// assert_eq!(cfg.sliding_window, 128);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CteConfig {
    /// Multiplies `QKᵀ`: a finite float32 value, 1.0 with SWA, CP, prefix caching or
    /// packing (pre-scale `q`), and at least [`MIN_MASKED_SCALE`](crate::scale::MIN_MASKED_SCALE)
    /// with the causal mask. Zero or negative scales are fine without a mask.
    pub scale: f64,
    /// Mask keys after the query.
    pub causal_mask: bool,
    /// Sliding window in keys (0: off); the window holds `q - sw + 1 ..= q`.
    pub sliding_window: i64,
    /// Prefix caching: `k_prior`, `v_prior`, `prior_used_len` are given.
    pub prefix_caching: bool,
    /// A sink logit per batch row is given.
    pub sink: bool,
    /// `q` is `(bs, seqlen_q, d)` (else `(bs, d, seqlen_q)`).
    pub tp_q: bool,
    /// `k` is `(bs_kv, seqlen_kv, d)` (else `(bs_kv, d, seqlen_kv)`).
    pub tp_k: bool,
    /// The output is `(bs, d, seqlen_q)` (else `(bs, seqlen_q, d)`).
    pub tp_out: bool,
    /// Also return the negated row max and the (reciprocal) row sum.
    pub cache_softmax: bool,
    /// Dtype of the cached statistics.
    pub softmax_dtype: Dtype,
    /// Dtype of matmul results in PSUM (bf16 only on trn3).
    pub mm_out_dtype: Dtype,
    /// Context-parallel degree (`global_cp_deg`); `Some` turns CP on.
    pub global_cp_deg: Option<i64>,
    /// CP with row-strided Q (`cp_offset` is the rank).
    pub cp_strided_q_slicing: bool,
    /// CP with striped Q and K/V (`cp_offset` is 0 or -1).
    pub cp_striped_input: bool,
    /// Sequence packing: `bound_min` / `bound_max` are given.
    pub packing: bool,
    /// Leave the output unnormalized and return the raw row sum.
    pub skip_output_normalization: bool,
    /// Static shapes, checked against the limits when given.
    pub dims: Option<CteDims>,
    /// The generation the kernel targets (`mm_out_dtype` bf16 needs trn3).
    pub target: Generation,
}

/// One rule of `attention_cte` (the NKI library's constraint table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CteRule {
    /// A7: `cache_softmax` needs `seqlen_q % 128 == 0`.
    CacheSoftmaxSeqlen,
    /// A8: sequence packing with prefix caching.
    PackingWithPrefix,
    /// A8: sequence packing with context parallelism.
    PackingWithCp,
    /// A9: batch must be positive.
    BatchPositive,
    /// A9: batch at most 512.
    BatchTooLarge,
    /// A9: KV batch must be positive.
    BatchKvPositive,
    /// A9: batch a multiple of the KV batch.
    BatchNotMultiple,
    /// A10: seqlen_q at most 131072.
    SeqlenQTooLong,
    /// A10: seqlen_kv + prior at most 131072.
    SeqlenKvTooLong,
    /// A12: sliding window at most 131072.
    WindowTooLarge,
    /// A12: sliding window not negative.
    WindowNegative,
    /// A13: head dim positive.
    HeadDimPositive,
    /// A13: head dim at most 128.
    HeadDimTooLarge,
    /// A14: mm_out_dtype fp32, or bf16 on trn3.
    MmOutDtype,
    /// A15: CP degree within [1, 32].
    CpDegree,
    /// A16: scale 1.0 with SWA, CP or prefix caching.
    ScaleMustBeOne,
    /// A17: CP needs the causal mask.
    CpNeedsCausal,
    /// A18: SWA needs the causal mask.
    SwaNeedsCausal,
    /// A19: striped input needs CP.
    StripedNeedsCp,
    /// A19: striped input needs the causal mask.
    StripedNeedsCausal,
    /// A19: striped input without SWA.
    StripedWithSwa,
    /// A19: striped input without prefix caching.
    StripedWithPrefix,
    /// A21: skip_output_normalization needs cache_softmax.
    SkipNormNeedsCache,
    /// A22: sequence packing masks with `range_select`, which applies no scale.
    PackingScale,
    /// Not checked by the library: scores are multiplied by the scale in fp32.
    ScaleNotFinite,
    /// Not checked by the library: the causal mask writes FLOAT32_MIN into scores
    /// and then multiplies them by the scale (the static `affine_select` path).
    CausalScale,
}

impl CteRule {
    /// The rule in words (a `const` string, usable in compile-time panics).
    pub const fn message(self) -> &'static str {
        match self {
            CteRule::CacheSoftmaxSeqlen => "attention_cte: cache_softmax needs seqlen_q to be a multiple of 128",
            CteRule::PackingWithPrefix => "attention_cte: sequence packing (bound_min/bound_max) is not supported with prefix caching",
            CteRule::PackingWithCp => "attention_cte: sequence packing (bound_min/bound_max) is not supported with context parallelism",
            CteRule::BatchPositive => "attention_cte: the batch size must be positive",
            CteRule::BatchTooLarge => "attention_cte: batch sizes above 512 are not supported",
            CteRule::BatchKvPositive => "attention_cte: the KV batch size must be positive",
            CteRule::BatchNotMultiple => "attention_cte: the Q batch size must be a multiple of the KV batch size (GQA)",
            CteRule::SeqlenQTooLong => "attention_cte: seqlen_q above 131072 is not supported",
            CteRule::SeqlenKvTooLong => "attention_cte: seqlen_kv plus the prior length above 131072 is not supported",
            CteRule::WindowTooLarge => "attention_cte: a sliding window above 131072 is not supported",
            CteRule::WindowNegative => "attention_cte: the sliding window must be >= 0 (0 turns it off)",
            CteRule::HeadDimPositive => "attention_cte: the head dim must be > 0",
            CteRule::HeadDimTooLarge => "attention_cte: head dims above 128 are not supported",
            CteRule::MmOutDtype => "attention_cte: mm_out_dtype must be float32, or bfloat16 on trn3 (gen4) only",
            CteRule::CpDegree => "attention_cte: global_cp_deg must be within [1, 32]",
            CteRule::ScaleMustBeOne => {
                "attention_cte: scale must be 1.0 with a sliding window, context parallelism or prefix caching (pre-scale q instead)"
            }
            CteRule::CpNeedsCausal => "attention_cte: context parallelism (global_cp_deg) needs causal_mask",
            CteRule::SwaNeedsCausal => "attention_cte: a sliding window needs causal_mask",
            CteRule::StripedNeedsCp => "attention_cte: cp_striped_input needs context parallelism (set global_cp_deg)",
            CteRule::StripedNeedsCausal => "attention_cte: cp_striped_input needs causal_mask",
            CteRule::StripedWithSwa => "attention_cte: cp_striped_input does not support a sliding window",
            CteRule::StripedWithPrefix => "attention_cte: cp_striped_input does not support prefix caching",
            CteRule::SkipNormNeedsCache => "attention_cte: skip_output_normalization needs cache_softmax",
            CteRule::PackingScale => {
                "attention_cte: sequence packing (bound_min/bound_max) masks with range_select, which applies no scale: scale must be 1.0 (pre-scale q instead)"
            }
            CteRule::ScaleNotFinite => "attention_cte: scale must be a finite float32 value (scores are multiplied by it in fp32)",
            CteRule::CausalScale => {
                "attention_cte: with causal_mask the scale must be at least 1e-30: masked scores are FLOAT32_MIN x scale, which a zero, negative or smaller scale unmasks"
            }
        }
    }
}

rules_of!(CteConfig, CteRule);

impl Default for CteConfig {
    fn default() -> Self {
        CteConfig::new()
    }
}

impl CteConfig {
    /// The Python defaults: scale 1.0, causal, `tp_q`, fp32 statistics and PSUM, trn2.
    pub const fn new() -> CteConfig {
        CteConfig {
            scale: 1.0,
            causal_mask: true,
            sliding_window: 0,
            prefix_caching: false,
            sink: false,
            tp_q: true,
            tp_k: false,
            tp_out: false,
            cache_softmax: false,
            softmax_dtype: Dtype::F32,
            mm_out_dtype: Dtype::F32,
            global_cp_deg: None,
            cp_strided_q_slicing: false,
            cp_striped_input: false,
            packing: false,
            skip_output_normalization: false,
            dims: None,
            target: Generation::Trn2,
        }
    }

    /// Sets [`scale`](Self::scale).
    pub const fn scale(mut self, scale: f64) -> Self {
        self.scale = scale;
        self
    }

    /// Sets [`causal_mask`](Self::causal_mask).
    pub const fn causal_mask(mut self, on: bool) -> Self {
        self.causal_mask = on;
        self
    }

    /// Sets [`sliding_window`](Self::sliding_window).
    pub const fn sliding_window(mut self, keys: i64) -> Self {
        self.sliding_window = keys;
        self
    }

    /// Sets [`prefix_caching`](Self::prefix_caching).
    pub const fn prefix_caching(mut self, on: bool) -> Self {
        self.prefix_caching = on;
        self
    }

    /// Sets [`sink`](Self::sink).
    pub const fn sink(mut self, on: bool) -> Self {
        self.sink = on;
        self
    }

    /// Sets the three layout flags.
    pub const fn layouts(mut self, tp_q: bool, tp_k: bool, tp_out: bool) -> Self {
        self.tp_q = tp_q;
        self.tp_k = tp_k;
        self.tp_out = tp_out;
        self
    }

    /// Sets [`cache_softmax`](Self::cache_softmax).
    pub const fn cache_softmax(mut self, on: bool) -> Self {
        self.cache_softmax = on;
        self
    }

    /// Sets [`softmax_dtype`](Self::softmax_dtype).
    pub const fn softmax_dtype(mut self, dtype: Dtype) -> Self {
        self.softmax_dtype = dtype;
        self
    }

    /// Sets [`mm_out_dtype`](Self::mm_out_dtype).
    pub const fn mm_out_dtype(mut self, dtype: Dtype) -> Self {
        self.mm_out_dtype = dtype;
        self
    }

    /// Contiguous context parallelism of degree `deg` (`cp_offset` = rank × seqlen_q).
    pub const fn context_parallel(mut self, deg: i64) -> Self {
        self.global_cp_deg = Some(deg);
        self
    }

    /// Sets [`cp_strided_q_slicing`](Self::cp_strided_q_slicing).
    pub const fn cp_strided_q_slicing(mut self, on: bool) -> Self {
        self.cp_strided_q_slicing = on;
        self
    }

    /// Sets [`cp_striped_input`](Self::cp_striped_input).
    pub const fn cp_striped_input(mut self, on: bool) -> Self {
        self.cp_striped_input = on;
        self
    }

    /// Sets [`packing`](Self::packing).
    pub const fn packing(mut self, on: bool) -> Self {
        self.packing = on;
        self
    }

    /// Sets [`skip_output_normalization`](Self::skip_output_normalization).
    pub const fn skip_output_normalization(mut self, on: bool) -> Self {
        self.skip_output_normalization = on;
        self
    }

    /// Sets static shapes (checked against the limits).
    pub const fn dims(mut self, dims: CteDims) -> Self {
        self.dims = Some(dims);
        self
    }

    /// Sets the target generation.
    pub const fn target(mut self, target: Generation) -> Self {
        self.target = target;
        self
    }

    /// The first rule this configuration breaks, in the order the kernel checks them.
    pub const fn violation(&self) -> Option<CteRule> {
        let swa = self.sliding_window > 0;
        let cp = self.global_cp_deg.is_some();
        if let Some(d) = self.dims
            && self.cache_softmax
            && d.seqlen_q % 128 != 0
        {
            return Some(CteRule::CacheSoftmaxSeqlen);
        }
        if self.packing && self.prefix_caching {
            return Some(CteRule::PackingWithPrefix);
        }
        if let (true, Some(deg)) = (self.packing, self.global_cp_deg)
            && deg > 1
        {
            return Some(CteRule::PackingWithCp);
        }
        if let Some(d) = self.dims {
            if d.batch <= 0 {
                return Some(CteRule::BatchPositive);
            }
            if d.batch > 512 {
                return Some(CteRule::BatchTooLarge);
            }
            if d.batch_kv <= 0 {
                return Some(CteRule::BatchKvPositive);
            }
            if d.batch % d.batch_kv != 0 {
                return Some(CteRule::BatchNotMultiple);
            }
            if d.seqlen_q > 131072 {
                return Some(CteRule::SeqlenQTooLong);
            }
            if d.seqlen_kv + d.seqlen_prior > 131072 {
                return Some(CteRule::SeqlenKvTooLong);
            }
        }
        if self.sliding_window > 131072 {
            return Some(CteRule::WindowTooLarge);
        }
        if self.sliding_window < 0 {
            return Some(CteRule::WindowNegative);
        }
        if let Some(d) = self.dims {
            if d.head_dim <= 0 {
                return Some(CteRule::HeadDimPositive);
            }
            if d.head_dim > 128 {
                return Some(CteRule::HeadDimTooLarge);
            }
        }
        let fp32_psum = matches!(self.mm_out_dtype, Dtype::F32);
        let bf16_psum = matches!(self.mm_out_dtype, Dtype::Bf16) && self.target.limits().has_bf16_psum;
        if !fp32_psum && !bf16_psum {
            return Some(CteRule::MmOutDtype);
        }
        if let Some(deg) = self.global_cp_deg
            && deg != 0
            && (deg < 1 || deg > 32)
        {
            return Some(CteRule::CpDegree);
        }
        if self.skip_output_normalization && !self.cache_softmax {
            return Some(CteRule::SkipNormNeedsCache);
        }
        if !is_finite_f32(self.scale) {
            return Some(CteRule::ScaleNotFinite);
        }
        if (swa || self.prefix_caching || cp) && self.scale != 1.0 {
            return Some(CteRule::ScaleMustBeOne);
        }
        if cp && !self.causal_mask {
            return Some(CteRule::CpNeedsCausal);
        }
        if swa && !self.causal_mask {
            return Some(CteRule::SwaNeedsCausal);
        }
        if self.cp_striped_input && !cp {
            return Some(CteRule::StripedNeedsCp);
        }
        if self.cp_striped_input && !self.causal_mask {
            return Some(CteRule::StripedNeedsCausal);
        }
        if self.cp_striped_input && swa {
            return Some(CteRule::StripedWithSwa);
        }
        if self.cp_striped_input && self.prefix_caching {
            return Some(CteRule::StripedWithPrefix);
        }
        if self.packing && self.scale != 1.0 {
            return Some(CteRule::PackingScale);
        }
        // With a window, CP, prefix caching or packing the scale is 1.0 by now;
        // otherwise the causal mask is the static FLOAT32_MIN fill that is scaled.
        if self.causal_mask && !keeps_masks(self.scale) {
            return Some(CteRule::CausalScale);
        }
        None
    }
}

/// A checked [`CteConfig`] constant: breaking one of `attention_cte`'s rules is a
/// compile error naming the rule.
///
/// ```
/// use nki_attention::{cte_config, cte::CteConfig};
/// let cfg = cte_config!(CteConfig::new().context_parallel(8).cp_striped_input(true));
/// assert!(cfg.violation().is_none());
/// ```
#[macro_export]
macro_rules! cte_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::cte::CteConfig, $cfg)
    };
}
