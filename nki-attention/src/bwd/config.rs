//! The typed configuration of `attention_bwd`, whose rules are checked at
//! compile time when the configuration is a constant (see
//! [`bwd_config!`](crate::bwd_config)).

use super::attention_bwd as kernel;
use crate::ring_bwd::head_tiles;
use crate::scale::{is_finite_f32, keeps_masks};

/// The shapes of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdDims {
    /// Batch size (`bs`).
    pub batch: i64,
    /// Query heads (`nheads`).
    pub heads: i64,
    /// Key/value heads (`nheads_kv`, a divisor of `heads`).
    pub kv_heads: i64,
    /// Query sequence length.
    pub seqlen_q: i64,
    /// Key sequence length.
    pub seqlen_k: i64,
    /// Head dimension.
    pub head_dim: i64,
}

/// Every flag of `attention_bwd` and, optionally, its shapes.
///
/// ```compile_fail
/// use nki_attention::{bwd_config, bwd::BwdConfig};
/// // A sliding window needs the causal mask.
/// let cfg = bwd_config!(BwdConfig::new().sliding_window(128));
/// ```
///
/// ```
/// use nki_attention::{bwd_config, bwd::{BwdConfig, BwdDims}};
/// const DIMS: BwdDims = BwdDims { batch: 1, heads: 8, kv_heads: 2, seqlen_q: 1024, seqlen_k: 1024, head_dim: 64 };
/// let cfg = bwd_config!(BwdConfig::new().causal(true).sliding_window(128).dims(DIMS));
/// assert_eq!(cfg.sliding_window, 128);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BwdConfig {
    /// The shapes, when known (checked against the tiling rules).
    pub dims: Option<BwdDims>,
    /// `use_causal_mask`.
    pub causal: bool,
    /// fp32 accumulators, `-LSE` and `D` (else the input dtype).
    pub mixed_precision: bool,
    /// `softmax_scale` (None or 0: `1/sqrt(head_dim)`), applied inside.
    pub softmax_scale: Option<f64>,
    /// `sliding_window`: keys `j > i - sliding_window` only (0 or less: none).
    pub sliding_window: i64,
    /// `bound_min` / `bound_max` are given (sequence packing).
    pub packed: bool,
}

/// One rule of `attention_bwd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwdRule {
    /// Batch, heads and KV heads positive, the heads a multiple of the KV heads.
    KvHeads,
    /// Both sequence lengths positive multiples of 128.
    SeqlenTiles,
    /// The head dim splits into equal tiles of at most 128.
    HeadDimTiles,
    /// The causal mask needs equal sequence lengths.
    CausalSeqlens,
    /// A sliding window needs the causal mask.
    WindowNeedsCausal,
    /// The scale is a finite float32 value.
    ScaleNotFinite,
    /// With a mask the scale keeps masked scores masked.
    MaskedScale,
}

impl BwdRule {
    /// The rule in words (a `const` string, usable in compile-time panics): the
    /// message of the kernel's assert of the rule.
    pub const fn message(self) -> &'static str {
        match self {
            BwdRule::KvHeads => kernel::KV_HEADS,
            BwdRule::SeqlenTiles => kernel::SEQLEN_TILES,
            BwdRule::HeadDimTiles => kernel::HEAD_DIM_TILES,
            BwdRule::CausalSeqlens => kernel::CAUSAL_SEQLENS,
            BwdRule::WindowNeedsCausal => kernel::WINDOW_NEEDS_CAUSAL,
            BwdRule::ScaleNotFinite => kernel::SCALE_NOT_FINITE,
            BwdRule::MaskedScale => kernel::MASKED_SCALE,
        }
    }
}

rules_of!(BwdConfig, BwdRule);

impl Default for BwdConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl BwdConfig {
    /// The Python defaults: non-causal, no mixed precision, scale `1/sqrt(d)`, no
    /// window, no packing.
    pub const fn new() -> BwdConfig {
        BwdConfig { dims: None, causal: false, mixed_precision: false, softmax_scale: None, sliding_window: 0, packed: false }
    }

    /// Sets [`dims`](Self::dims).
    pub const fn dims(mut self, dims: BwdDims) -> Self {
        self.dims = Some(dims);
        self
    }

    /// Sets [`causal`](Self::causal).
    pub const fn causal(mut self, on: bool) -> Self {
        self.causal = on;
        self
    }

    /// Sets [`mixed_precision`](Self::mixed_precision).
    pub const fn mixed_precision(mut self, on: bool) -> Self {
        self.mixed_precision = on;
        self
    }

    /// Sets [`softmax_scale`](Self::softmax_scale).
    pub const fn softmax_scale(mut self, scale: f64) -> Self {
        self.softmax_scale = Some(scale);
        self
    }

    /// Sets [`sliding_window`](Self::sliding_window).
    pub const fn sliding_window(mut self, window: i64) -> Self {
        self.sliding_window = window;
        self
    }

    /// Sets [`packed`](Self::packed).
    pub const fn packed(mut self, on: bool) -> Self {
        self.packed = on;
        self
    }

    /// The given scale, None for the default (`None` or 0, as the library's `softmax_scale or ...`).
    pub const fn given_scale(&self) -> Option<f64> {
        match self.softmax_scale {
            Some(s) if s != 0.0 => Some(s),
            _ => None,
        }
    }

    /// The first rule this configuration breaks.
    pub const fn violation(&self) -> Option<BwdRule> {
        if let Some(d) = self.dims {
            if d.batch < 1 || d.heads < 1 || d.kv_heads < 1 || d.heads % d.kv_heads != 0 {
                return Some(BwdRule::KvHeads);
            }
            if d.seqlen_q < 128 || d.seqlen_q % 128 != 0 || d.seqlen_k < 128 || d.seqlen_k % 128 != 0 {
                return Some(BwdRule::SeqlenTiles);
            }
            if d.head_dim < 1 || d.head_dim % head_tiles(d.head_dim).0 != 0 {
                return Some(BwdRule::HeadDimTiles);
            }
            if self.causal && d.seqlen_q != d.seqlen_k {
                return Some(BwdRule::CausalSeqlens);
            }
        }
        if self.sliding_window > 0 && !self.causal {
            return Some(BwdRule::WindowNeedsCausal);
        }
        if let Some(scale) = self.given_scale() {
            if !is_finite_f32(scale) {
                return Some(BwdRule::ScaleNotFinite);
            }
            if (self.causal || self.packed) && !keeps_masks(scale) {
                return Some(BwdRule::MaskedScale);
            }
        }
        None
    }
}

/// A checked [`BwdConfig`] constant: breaking one of `attention_bwd`'s rules is a
/// compile error naming the rule.
#[macro_export]
macro_rules! bwd_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::bwd::BwdConfig, $cfg)
    };
}
