//! The configuration both ring passes share: [`RingFeatures`] (the ring, the
//! sequence layout, the masks, the scale, the shapes and the target), its rules
//! ([`RingRule`], each with one message, in [`ring_rules`](crate::ring_rules)) and the builder methods both
//! [`RingFwdConfig`](crate::ring_fwd::RingFwdConfig) and
//! [`RingBwdConfig`](crate::ring_bwd::RingBwdConfig) expose for it.

use crate::rings::{GroupProblem, group_problem, ring_count};
use crate::scale::is_finite_f32;
use crate::shard::SeqLayout;
use nki::NkiError;
use nki::hw::Generation;

/// Static per-rank shapes of a ring launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingDims {
    /// Batch.
    pub batch: i64,
    /// Query heads (K and V have [`RingFeatures::kv_heads`] of them).
    pub heads: i64,
    /// Tokens per rank.
    pub seqlen: i64,
    /// Head dimension.
    pub head_dim: i64,
}

/// What the forward and the backward ring take alike: the ring, the layout of
/// the sequence over its ranks, the masks and the scale, and optionally the shapes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingFeatures {
    /// Ranks in each ring.
    pub num_workers: i64,
    /// Causal mask over global positions.
    pub causal: bool,
    /// How the sequence is split over the ranks (striped and zigzag need the causal mask).
    pub layout: SeqLayout,
    /// Sliding window `(L, R)`: key `j` visible to query `i` only if `i - L <= j <= i + R`.
    pub window: Option<(i64, i64)>,
    /// Chunked attention: key `j` visible to query `i` only if `i / C == j / C`.
    pub chunk_size: Option<i64>,
    /// Logit soft cap `C > 0`: logits `C·tanh(scale·q·k / C)`.
    pub soft_cap: Option<f64>,
    /// Softmax scale (default `1/sqrt(d)`): a finite float32 value (the backward
    /// adds a lower bound with masks, see its rules).
    pub softmax_scale: Option<f64>,
    /// The rings, in send order (empty: one ring of `num_workers` ranks `0..num_workers`).
    pub replica_groups: &'static [&'static [i64]],
    /// Static per-rank shapes, checked against the limits when given.
    pub dims: Option<RingDims>,
    /// K/V heads for grouped-query attention (None: as many as the query heads);
    /// query head `i` reads KV head `i / (heads / kv_heads)`.
    pub kv_heads: Option<i64>,
    /// The generation the kernel targets.
    pub target: Generation,
}

/// One rule of [`RingFeatures`], shared by both passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingRule {
    /// At least one worker.
    WorkersPositive,
    /// Striped input needs the causal mask.
    StripedNeedsCausal,
    /// Zigzag input needs the causal mask.
    ZigzagNeedsCausal,
    /// Window sizes are non-negative.
    WindowNegative,
    /// Chunks hold at least one token.
    ChunkPositive,
    /// The soft cap is a positive finite float32 value.
    SoftCapPositive,
    /// The softmax scale is a finite float32 value.
    ScaleNotFinite,
    /// Every replica group holds `num_workers` ranks.
    GroupSize,
    /// Rank ids are distinct, non-negative and cover `0..ranks`.
    GroupRanks,
    /// GQA: at least one KV head, and the query heads a multiple of them.
    KvHeads,
    /// Batch and heads positive.
    BatchHeads,
    /// Tokens per rank a positive multiple of 128.
    SeqlenMultiple,
}

impl RingRule {
    /// The rule in words, one text for both passes (a `const` string, usable in
    /// compile-time panics): the constant of [`ring_rules`](crate::ring_rules)
    /// the kernels' asserts name too.
    pub const fn message(self) -> &'static str {
        use crate::ring_rules as m;
        match self {
            RingRule::WorkersPositive => m::WORKERS_POSITIVE,
            RingRule::StripedNeedsCausal => m::STRIPED_NEEDS_CAUSAL,
            RingRule::ZigzagNeedsCausal => m::ZIGZAG_NEEDS_CAUSAL,
            RingRule::WindowNegative => m::WINDOW_NEGATIVE,
            RingRule::ChunkPositive => m::CHUNK_POSITIVE,
            RingRule::SoftCapPositive => m::SOFT_CAP_POSITIVE,
            RingRule::ScaleNotFinite => m::SCALE_NOT_FINITE,
            RingRule::GroupSize => m::GROUP_SIZE,
            RingRule::GroupRanks => m::GROUP_RANKS,
            RingRule::KvHeads => m::KV_HEADS,
            RingRule::BatchHeads => m::BATCH_HEADS,
            RingRule::SeqlenMultiple => m::SEQLEN_MULTIPLE,
        }
    }
}

/// The names one pass's kernel gives the parameters a [`RingRule`] error names.
pub(crate) struct RingParamNames {
    /// The striped-layout flag.
    pub striped: &'static str,
    /// The zigzag-layout flag.
    pub zigzag: &'static str,
    /// Batch and heads.
    pub batch_heads: &'static str,
    /// Tokens per rank.
    pub seqlen: &'static str,
}

impl RingFeatures {
    /// One ring of `num_workers`: non-causal, contiguous, no masks, scale `1/sqrt(d)`, trn2.
    pub const fn new(num_workers: i64) -> RingFeatures {
        RingFeatures {
            num_workers,
            causal: false,
            layout: SeqLayout::Contiguous,
            window: None,
            chunk_size: None,
            soft_cap: None,
            softmax_scale: None,
            replica_groups: &[],
            dims: None,
            kv_heads: None,
            target: Generation::Trn2,
        }
    }

    /// Whether rank `r` holds the tokens `t` with `t mod num_workers == r`.
    pub const fn striped(&self) -> bool {
        matches!(self.layout, SeqLayout::Striped)
    }

    /// Whether rank `r` holds chunks `r` and `2W-1-r` of `seqlen / 2` tokens.
    pub const fn zigzag(&self) -> bool {
        matches!(self.layout, SeqLayout::Zigzag)
    }

    /// Whether any key is masked: causal, zigzag, a window or chunks.
    pub const fn masked(&self) -> bool {
        self.causal || self.zigzag() || self.window.is_some() || self.chunk_size.is_some()
    }

    /// Number of rings.
    pub const fn rings(&self) -> usize {
        ring_count(self.replica_groups)
    }

    /// Ranks a launch needs: every ring's workers.
    pub const fn ranks(&self) -> usize {
        self.rings() * self.num_workers as usize
    }

    /// The first shared rule the features break.
    pub const fn violation(&self) -> Option<RingRule> {
        if self.num_workers < 1 {
            return Some(RingRule::WorkersPositive);
        }
        if self.striped() && !self.causal {
            return Some(RingRule::StripedNeedsCausal);
        }
        if self.zigzag() && !self.causal {
            return Some(RingRule::ZigzagNeedsCausal);
        }
        if let Some((l, r)) = self.window
            && (l < 0 || r < 0)
        {
            return Some(RingRule::WindowNegative);
        }
        if let Some(c) = self.chunk_size
            && c < 1
        {
            return Some(RingRule::ChunkPositive);
        }
        if let Some(c) = self.soft_cap
            && !(c > 0.0 && is_finite_f32(c))
        {
            return Some(RingRule::SoftCapPositive);
        }
        if let Some(scale) = self.softmax_scale
            && !is_finite_f32(scale)
        {
            return Some(RingRule::ScaleNotFinite);
        }
        match group_problem(self.replica_groups, self.num_workers) {
            Some(GroupProblem::Size) => return Some(RingRule::GroupSize),
            Some(GroupProblem::Ranks) => return Some(RingRule::GroupRanks),
            None => {}
        }
        if let Some(kv) = self.kv_heads
            && kv < 1
        {
            return Some(RingRule::KvHeads);
        }
        if let Some(d) = self.dims {
            if d.batch < 1 || d.heads < 1 {
                return Some(RingRule::BatchHeads);
            }
            if let Some(kv) = self.kv_heads
                && d.heads % kv != 0
            {
                return Some(RingRule::KvHeads);
            }
            if d.seqlen < 128 || d.seqlen % 128 != 0 {
                return Some(RingRule::SeqlenMultiple);
            }
        }
        None
    }

    /// The error for a broken shared rule: the parameter (as the pass's kernel names
    /// it), its value and `message`.
    pub(crate) fn rule_error(&self, rule: RingRule, names: &RingParamNames, message: &str) -> NkiError {
        let d = self.dims;
        let (param, value): (&str, String) = match rule {
            RingRule::WorkersPositive => ("num_workers", self.num_workers.to_string()),
            RingRule::StripedNeedsCausal => (names.striped, "true without use_causal_mask".into()),
            RingRule::ZigzagNeedsCausal => (names.zigzag, "true without use_causal_mask".into()),
            RingRule::WindowNegative => ("sliding_window", format!("{:?}", self.window.unwrap_or((0, 0)))),
            RingRule::ChunkPositive => ("chunk_size", self.chunk_size.unwrap_or(0).to_string()),
            RingRule::SoftCapPositive => ("soft_cap", self.soft_cap.map_or_else(|| "None".into(), |c| c.to_string())),
            RingRule::ScaleNotFinite => ("softmax_scale", self.scale_text()),
            RingRule::GroupSize | RingRule::GroupRanks => ("replica_groups", format!("{:?}", self.replica_groups)),
            RingRule::KvHeads => {
                ("kv_heads", format!("{} with {} query heads", self.kv_heads.unwrap_or(0), d.map_or("?".into(), |d| d.heads.to_string())))
            }
            RingRule::BatchHeads => (names.batch_heads, d.map_or(String::new(), |d| format!("{}, {}", d.batch, d.heads))),
            RingRule::SeqlenMultiple => (names.seqlen, d.map_or(0, |d| d.seqlen).to_string()),
        };
        NkiError::argument(param, value, message)
    }

    /// The configured softmax scale as an error value.
    pub(crate) fn scale_text(&self) -> String {
        self.softmax_scale.map_or_else(|| "None".into(), |s| s.to_string())
    }
}

/// The builder methods of the [`RingFeatures`] a pass's configuration embeds as
/// its `ring` field: `const fn` setters and the derived ring counts.
macro_rules! ring_features_api {
    () => {
        /// Sets every shared feature at once.
        pub const fn features(mut self, ring: $crate::ring_config::RingFeatures) -> Self {
            self.ring = ring;
            self
        }

        /// Sets [`causal`](crate::ring_config::RingFeatures::causal).
        pub const fn causal(mut self, on: bool) -> Self {
            self.ring.causal = on;
            self
        }

        /// Sets the [`layout`](crate::ring_config::RingFeatures::layout).
        pub const fn layout(mut self, layout: $crate::shard::SeqLayout) -> Self {
            self.ring.layout = layout;
            self
        }

        /// The striped layout when `on`; off, a striped layout turns contiguous.
        pub const fn striped(mut self, on: bool) -> Self {
            if on {
                self.ring.layout = $crate::shard::SeqLayout::Striped;
            } else if self.ring.striped() {
                self.ring.layout = $crate::shard::SeqLayout::Contiguous;
            }
            self
        }

        /// The zigzag layout when `on`; off, a zigzag layout turns contiguous.
        pub const fn zigzag(mut self, on: bool) -> Self {
            if on {
                self.ring.layout = $crate::shard::SeqLayout::Zigzag;
            } else if self.ring.zigzag() {
                self.ring.layout = $crate::shard::SeqLayout::Contiguous;
            }
            self
        }

        /// The layout of the sequence over the ranks.
        pub const fn seq_layout(&self) -> $crate::shard::SeqLayout {
            self.ring.layout
        }

        /// Sets [`window`](crate::ring_config::RingFeatures::window) to `(left, right)`.
        pub const fn sliding_window(mut self, left: i64, right: i64) -> Self {
            self.ring.window = Some((left, right));
            self
        }

        /// Sets [`chunk_size`](crate::ring_config::RingFeatures::chunk_size).
        pub const fn chunk_size(mut self, size: i64) -> Self {
            self.ring.chunk_size = Some(size);
            self
        }

        /// Sets [`soft_cap`](crate::ring_config::RingFeatures::soft_cap).
        pub const fn soft_cap(mut self, cap: f64) -> Self {
            self.ring.soft_cap = Some(cap);
            self
        }

        /// Sets [`softmax_scale`](crate::ring_config::RingFeatures::softmax_scale).
        pub const fn softmax_scale(mut self, scale: f64) -> Self {
            self.ring.softmax_scale = Some(scale);
            self
        }

        /// Sets [`replica_groups`](crate::ring_config::RingFeatures::replica_groups).
        pub const fn replica_groups(mut self, groups: &'static [&'static [i64]]) -> Self {
            self.ring.replica_groups = groups;
            self
        }

        /// Sets static per-rank shapes (checked against the limits).
        pub const fn dims(mut self, dims: $crate::ring_config::RingDims) -> Self {
            self.ring.dims = Some(dims);
            self
        }

        /// Sets [`kv_heads`](crate::ring_config::RingFeatures::kv_heads) (grouped-query attention).
        pub const fn kv_heads(mut self, kv_heads: i64) -> Self {
            self.ring.kv_heads = Some(kv_heads);
            self
        }

        /// Sets the target generation.
        pub const fn target(mut self, target: ::nki::hw::Generation) -> Self {
            self.ring.target = target;
            self
        }

        /// Number of rings.
        pub const fn rings(&self) -> usize {
            self.ring.rings()
        }

        /// Ranks a launch needs: every ring's workers.
        pub const fn ranks(&self) -> usize {
            self.ring.ranks()
        }
    };
}
pub(crate) use ring_features_api;
