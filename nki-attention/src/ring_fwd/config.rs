//! The typed configuration of `ring_attention_spmd_fwd`, whose rules are checked
//! at compile time when the configuration is a constant (see
//! [`ring_fwd_config!`](crate::ring_fwd_config)).

use crate::ring_config::{RingFeatures, RingParamNames, RingRule, ring_features_api};
use crate::ring_fwd::ring_attention_fwd as kernel;
use nki::Dtype;
use nki::hw::Generation;

/// Every flag of `ring_attention_spmd_fwd` and, optionally, its shapes.
///
/// Built with `const fn` setters; wrapped in
/// [`ring_fwd_config!`](crate::ring_fwd_config) its rules become compile errors:
///
/// ```compile_fail
/// use nki_attention::{ring_fwd_config, ring_fwd::RingFwdConfig};
/// // Striped input needs the causal mask.
/// let cfg = ring_fwd_config!(RingFwdConfig::new(4).striped(true));
/// ```
///
/// ```
/// use nki_attention::{ring_fwd_config, ring_fwd::RingFwdConfig};
/// let cfg = ring_fwd_config!(RingFwdConfig::new(4).causal(true).striped(true).training(true));
/// assert_eq!(cfg.ring.num_workers, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingFwdConfig {
    /// The ring, layout, masks, scale, shapes and target (shared with the backward).
    pub ring: RingFeatures,
    /// Also return the log-sum-exp.
    pub training: bool,
    /// Dtype of the log-sum-exp.
    pub lse_dtype: Dtype,
    /// `q` is `[b, h, seqlen, d]` (else `[b, h, d, seqlen]`).
    pub tp_q: bool,
    /// `k` is `[b, h, seqlen, d]` (else `[b, h, d, seqlen]`).
    pub tp_k: bool,
}

/// One rule of `ring_attention_spmd_fwd`: the rules both passes share, and the
/// forward's own (the library's asserts and the conditions it leaves unchecked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingFwdRule {
    /// A rule of the [`RingFeatures`] both passes share.
    Ring(RingRule),
    /// F1: Trainium2 or later.
    NeedsTrn2,
    /// F8: at most 32 workers with the causal mask.
    TooManyCausalWorkers,
    /// F3: head dim within `1..=128`.
    HeadDim,
}

impl RingFwdRule {
    /// The rule in words (a `const` string, usable in compile-time panics): the
    /// message the kernel's assert of the rule names.
    pub const fn message(self) -> &'static str {
        match self {
            RingFwdRule::Ring(rule) => rule.message(),
            RingFwdRule::NeedsTrn2 => kernel::NEEDS_TRN2,
            RingFwdRule::TooManyCausalWorkers => kernel::TOO_MANY_CAUSAL_WORKERS,
            RingFwdRule::HeadDim => kernel::HEAD_DIM,
        }
    }
}

/// The forward kernel's names for the parameters a shared rule's error names.
pub(crate) const FWD_PARAMS: RingParamNames =
    RingParamNames { striped: "striped_input", zigzag: "zigzag_input", batch_heads: "b, h", seqlen: "seqlen" };

rules_of!(RingFwdConfig, RingFwdRule);

impl RingFwdConfig {
    /// The Python defaults for a ring of `num_workers`: non-causal, contiguous,
    /// no LSE, `q` and `k` d-major, scale `1/sqrt(d)`, one ring, trn2.
    pub const fn new(num_workers: i64) -> RingFwdConfig {
        RingFwdConfig { ring: RingFeatures::new(num_workers), training: false, lse_dtype: Dtype::F32, tp_q: false, tp_k: false }
    }

    ring_features_api!();

    /// Sets [`training`](Self::training).
    pub const fn training(mut self, on: bool) -> Self {
        self.training = on;
        self
    }

    /// Sets [`lse_dtype`](Self::lse_dtype).
    pub const fn lse_dtype(mut self, dtype: Dtype) -> Self {
        self.lse_dtype = dtype;
        self
    }

    /// Sets the two layout flags.
    pub const fn layouts(mut self, tp_q: bool, tp_k: bool) -> Self {
        self.tp_q = tp_q;
        self.tp_k = tp_k;
        self
    }

    /// The first rule this configuration breaks: the target, then the shared
    /// rules, then the forward's limits.
    pub const fn violation(&self) -> Option<RingFwdRule> {
        let ring = &self.ring;
        if matches!(ring.target, Generation::Trn1) {
            return Some(RingFwdRule::NeedsTrn2);
        }
        if let Some(rule) = ring.violation() {
            return Some(RingFwdRule::Ring(rule));
        }
        if ring.causal && ring.num_workers > 32 {
            return Some(RingFwdRule::TooManyCausalWorkers);
        }
        if let Some(d) = ring.dims
            && (d.head_dim < 1 || d.head_dim > 128)
        {
            return Some(RingFwdRule::HeadDim);
        }
        None
    }
}

/// A checked [`RingFwdConfig`] constant: breaking one of the kernel's rules is a
/// compile error naming the rule.
///
/// ```
/// use nki_attention::{ring_fwd_config, ring_fwd::RingFwdConfig};
/// const GROUPS: &[&[i64]] = &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]];
/// let cfg = ring_fwd_config!(RingFwdConfig::new(2).replica_groups(GROUPS));
/// assert_eq!(cfg.ranks(), 8);
/// ```
#[macro_export]
macro_rules! ring_fwd_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::ring_fwd::RingFwdConfig, $cfg)
    };
}
