//! The typed configuration of `ring_attention_spmd_bwd`, whose rules are checked
//! at compile time when the configuration is a constant (see
//! [`ring_bwd_config!`](crate::ring_bwd_config)).

use crate::ring_bwd::ring_attention_bwd as kernel;
use crate::ring_config::{RingFeatures, RingParamNames, RingRule, ring_features_api};
use crate::scale::keeps_masks;
use nki::Dtype;

/// Every flag of `ring_attention_spmd_bwd` and, optionally, its shapes.
///
/// ```compile_fail
/// use nki_attention::{ring_bwd_config, ring_bwd::RingBwdConfig};
/// use nki_attention::ring_fwd::RingDims;
/// // 200 tokens per rank are not a multiple of 128.
/// const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 200, head_dim: 64 };
/// let cfg = ring_bwd_config!(RingBwdConfig::new(4).causal(true).dims(DIMS));
/// ```
///
/// ```
/// use nki_attention::{ring_bwd_config, ring_bwd::RingBwdConfig};
/// let cfg = ring_bwd_config!(RingBwdConfig::new(4).causal(true).striped(true).lnc(2));
/// assert_eq!(cfg.ranks(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingBwdConfig {
    /// The ring, layout, masks, scale, shapes and target (shared with the forward).
    /// The scale is applied inside (Q is unscaled): a finite float32 value, at least
    /// [`MIN_MASKED_SCALE`](crate::scale::MIN_MASKED_SCALE) with a mask, of either
    /// sign without one. The shapes are checked against the tiling rules and, with
    /// the dtype, the target's SBUF.
    pub ring: RingFeatures,
    /// Segment ids are given (their tiles count in the SBUF footprint; the
    /// launch sets it from its inputs).
    pub segment_ids: bool,
    /// fp32 accumulators, `-LSE` and `D` (else the input dtype).
    pub mixed_precision: bool,
    /// The LNC degree the kernel runs with (`lnc_size`).
    pub lnc: i64,
    /// The dtype of q, k, v, o and dy, when known: with `dims` it sizes the SBUF
    /// footprint (see [`max_seqlen`](Self::max_seqlen)).
    pub dtype: Option<Dtype>,
}

/// One rule of `ring_attention_spmd_bwd`: the rules both passes share, and the
/// backward's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingBwdRule {
    /// A rule of the [`RingFeatures`] both passes share.
    Ring(RingRule),
    /// `lnc_size` is 1 or 2.
    LncSize,
    /// With a mask the scale keeps masked scores masked (the backward scales
    /// FLOAT32_MIN-masked scores inside `exp(scale·s - lse)`).
    CausalScale,
    /// The head dim splits into equal tiles of at most 128.
    HeadDimTiles,
    /// K, V, dK and dV of the slice fit the target's SBUF partition.
    SbufCapacity,
}

impl RingBwdRule {
    /// The rule in words (a `const` string, usable in compile-time panics): the
    /// message the kernel's assert of the rule names, where it asserts it.
    pub const fn message(self) -> &'static str {
        match self {
            RingBwdRule::Ring(rule) => rule.message(),
            RingBwdRule::LncSize => "ring_attention_spmd_bwd: lnc_size must be 1 or 2",
            RingBwdRule::CausalScale => kernel::CAUSAL_SCALE,
            RingBwdRule::HeadDimTiles => kernel::HEAD_DIM_TILES,
            RingBwdRule::SbufCapacity => {
                "ring_attention_spmd_bwd: K, V, dK and dV of the whole slice stay in SBUF, so the tokens per rank must fit the target's SBUF partition (see RingBwdConfig::max_seqlen)"
            }
        }
    }
}

/// The backward kernel's names for the parameters a shared rule's error names.
pub(crate) const BWD_PARAMS: RingParamNames =
    RingParamNames { striped: "striped_attention", zigzag: "zigzag_attention", batch_heads: "B, N", seqlen: "S" };

rules_of!(RingBwdConfig, RingBwdRule);

/// Equal head-dim tiles of at most 128: `(size, count)` (the kernel's `head_tiles`).
pub(crate) const fn head_tiles(dh: i64) -> (i64, i64) {
    let n = (dh + 127) / 128;
    ((dh + n - 1) / n, n)
}

impl RingBwdConfig {
    /// The Python defaults for a ring of `num_workers`: non-causal, contiguous,
    /// mixed precision, scale `1/sqrt(d)`, LNC1, one ring, trn2.
    pub const fn new(num_workers: i64) -> RingBwdConfig {
        RingBwdConfig { ring: RingFeatures::new(num_workers), segment_ids: false, mixed_precision: true, lnc: 1, dtype: None }
    }

    ring_features_api!();

    /// Sets [`mixed_precision`](Self::mixed_precision).
    pub const fn mixed_precision(mut self, on: bool) -> Self {
        self.mixed_precision = on;
        self
    }

    /// Sets [`lnc`](Self::lnc).
    pub const fn lnc(mut self, lnc: i64) -> Self {
        self.lnc = lnc;
        self
    }

    /// Sets [`dtype`](Self::dtype).
    pub const fn dtype(mut self, dtype: Dtype) -> Self {
        self.dtype = Some(dtype);
        self
    }

    /// Sets [`segment_ids`](Self::segment_ids).
    pub const fn segment_ids(mut self, on: bool) -> Self {
        self.segment_ids = on;
        self
    }

    /// The first rule this configuration breaks: the shared rules, then the
    /// backward's own.
    pub const fn violation(&self) -> Option<RingBwdRule> {
        let ring = &self.ring;
        if let Some(rule) = ring.violation() {
            return Some(RingBwdRule::Ring(rule));
        }
        if self.lnc < 1 || self.lnc > 2 {
            return Some(RingBwdRule::LncSize);
        }
        if let Some(scale) = ring.softmax_scale
            && ring.masked()
            && !keeps_masks(scale)
        {
            return Some(RingBwdRule::CausalScale);
        }
        if let Some(d) = ring.dims
            && (d.head_dim < 1 || d.head_dim % head_tiles(d.head_dim).0 != 0)
        {
            return Some(RingBwdRule::HeadDimTiles);
        }
        if let Some(bytes) = self.sbuf_bytes()
            && bytes > self.sbuf_capacity()
        {
            return Some(RingBwdRule::SbufCapacity);
        }
        None
    }
}

#[macro_export]
macro_rules! ring_bwd_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::ring_bwd::RingBwdConfig, $cfg)
    };
}
