//! The messages of the rules both ring passes share ([`RingRule`](crate::ring_config::RingRule)
//! and the kernels' one layout flag),
//! one constant each: the kernels' asserts name them (`crate::ring_rules::NAME`,
//! which their emitted Python imports from this module), and the typed API's
//! checks, at compile time and at run time, and the CLI return them.

use nki::prelude::*;

pub use rules::*;

/// One message per shared ring rule.
#[nki_module]
pub mod rules {
    /// `RingRule::WorkersPositive`.
    pub const WORKERS_POSITIVE: &str = "ring attention: num_workers must be >= 1";
    /// `RingRule::StripedNeedsCausal`.
    pub const STRIPED_NEEDS_CAUSAL: &str = "ring attention: striped input needs the causal mask (use_causal_mask)";
    /// `RingRule::ZigzagNeedsCausal`.
    pub const ZIGZAG_NEEDS_CAUSAL: &str = "ring attention: zigzag input needs the causal mask (use_causal_mask)";
    /// The kernels' striped and zigzag flags both set (the typed API's
    /// `SeqLayout` holds one layout, so it has no rule for this).
    pub const ONE_LAYOUT: &str = "ring attention: the striped and zigzag layouts exclude each other";
    /// `RingRule::WindowNegative`.
    pub const WINDOW_NEGATIVE: &str = "ring attention: the sliding window sizes (L, R) must be >= 0";
    /// `RingRule::ChunkPositive`.
    pub const CHUNK_POSITIVE: &str = "ring attention: chunk_size must be >= 1";
    /// `RingRule::SoftCapPositive`.
    pub const SOFT_CAP_POSITIVE: &str = "ring attention: soft_cap must be a positive finite float32 value";
    /// `RingRule::ScaleNotFinite`.
    pub const SCALE_NOT_FINITE: &str = "ring attention: softmax_scale must be a finite float32 value";
    /// `RingRule::GroupSize`.
    pub const GROUP_SIZE: &str = "ring attention: every replica group must hold num_workers ranks";
    /// `RingRule::GroupRanks`.
    pub const GROUP_RANKS: &str = "ring attention: replica groups must name each rank 0..groups x num_workers exactly once";
    /// `RingRule::KvHeads`.
    pub const KV_HEADS: &str = "ring attention: kv_heads must be >= 1 and divide the query heads (GQA)";
    /// `RingRule::BatchHeads`.
    pub const BATCH_HEADS: &str = "ring attention: batch and heads must be positive";
    /// `RingRule::SeqlenMultiple`.
    pub const SEQLEN_MULTIPLE: &str = "ring attention: the tokens per rank must be a positive multiple of 128";
}
