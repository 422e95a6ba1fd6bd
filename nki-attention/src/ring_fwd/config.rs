//! The typed configuration of `ring_attention_spmd_fwd`, whose rules are checked
//! at compile time when the configuration is a constant (see
//! [`ring_fwd_config!`](crate::ring_fwd_config)).

use crate::rings::{GroupProblem, group_problem, ring_count};
use crate::scale::is_finite_f32;
use crate::shard::SeqLayout;
use nki::Dtype;
use nki::hw::Generation;

/// Static per-rank shapes of a ring launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingDims {
    /// Batch.
    pub batch: i64,
    /// Query heads (K and V have [`RingFwdConfig::kv_heads`] of them).
    pub heads: i64,
    /// Tokens per rank.
    pub seqlen: i64,
    /// Head dimension.
    pub head_dim: i64,
}

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
/// assert_eq!(cfg.num_workers, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingFwdConfig {
    /// Ranks in each ring.
    pub num_workers: i64,
    /// Causal mask over global positions.
    pub causal: bool,
    /// Rank `r` holds the tokens `t` with `t mod num_workers == r` (else contiguous blocks).
    pub striped: bool,
    /// Rank `r` holds chunks `r` and `2W-1-r` of `seqlen / 2` tokens (zigzag; needs the causal mask).
    pub zigzag: bool,
    /// Sliding window `(L, R)`: key `j` visible to query `i` only if `i - L <= j <= i + R`.
    pub window: Option<(i64, i64)>,
    /// Chunked attention: key `j` visible to query `i` only if `i / C == j / C`.
    pub chunk_size: Option<i64>,
    /// Logit soft cap `C > 0`: logits `C·tanh(scale·q·k / C)`.
    pub soft_cap: Option<f64>,
    /// Also return the log-sum-exp.
    pub training: bool,
    /// Dtype of the log-sum-exp.
    pub lse_dtype: Dtype,
    /// `q` is `[b, h, seqlen, d]` (else `[b, h, d, seqlen]`).
    pub tp_q: bool,
    /// `k` is `[b, h, seqlen, d]` (else `[b, h, d, seqlen]`).
    pub tp_k: bool,
    /// Softmax scale (default `1/sqrt(d)`): a finite float32 value of either sign.
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

/// One rule of `ring_attention_spmd_fwd` (the library's asserts and the
/// conditions it leaves unchecked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingFwdRule {
    /// F1: Trainium2 or later.
    NeedsTrn2,
    /// At least one worker.
    WorkersPositive,
    /// F8: at most 32 workers with the causal mask.
    TooManyCausalWorkers,
    /// F6: striped input needs the causal mask.
    StripedNeedsCausal,
    /// Zigzag input needs the causal mask.
    ZigzagNeedsCausal,
    /// One layout: striped and zigzag exclude each other.
    OneLayout,
    /// Window sizes are non-negative.
    WindowNegative,
    /// Chunks hold at least one token.
    ChunkPositive,
    /// The soft cap is a positive finite float32 value.
    SoftCapPositive,
    /// Every replica group holds `num_workers` ranks.
    GroupSize,
    /// Rank ids are distinct, non-negative and cover `0..ranks`.
    GroupRanks,
    /// F3: head dim within `1..=128`.
    HeadDim,
    /// F4: tokens per rank a positive multiple of 128.
    SeqlenMultiple,
    /// Batch and heads positive.
    BatchHeads,
    /// GQA: at least one KV head, and the query heads a multiple of them.
    KvHeads,
    /// The softmax scale is a finite float32 value (any sign: causal rings scale Q
    /// before the masks, which are not scaled; without the causal mask nothing is masked).
    ScaleNotFinite,
}

impl RingFwdRule {
    /// The rule in words (a `const` string, usable in compile-time panics).
    pub const fn message(self) -> &'static str {
        match self {
            RingFwdRule::NeedsTrn2 => "ring_attention_spmd_fwd: needs Trainium2 or later (trn1 is not supported)",
            RingFwdRule::WorkersPositive => "ring_attention_spmd_fwd: num_workers must be >= 1",
            RingFwdRule::TooManyCausalWorkers => {
                "ring_attention_spmd_fwd: the causal mask supports at most 32 workers (attention_cte's global_cp_deg)"
            }
            RingFwdRule::StripedNeedsCausal => "ring_attention_spmd_fwd: striped input needs the causal mask",
            RingFwdRule::ZigzagNeedsCausal => "ring_attention_spmd_fwd: zigzag input needs the causal mask",
            RingFwdRule::OneLayout => "ring_attention_spmd_fwd: striped and zigzag input exclude each other",
            RingFwdRule::WindowNegative => "ring_attention_spmd_fwd: the sliding window sizes (L, R) must be >= 0",
            RingFwdRule::ChunkPositive => "ring_attention_spmd_fwd: chunk_size must be >= 1",
            RingFwdRule::SoftCapPositive => "ring_attention_spmd_fwd: soft_cap must be a positive finite float32 value",
            RingFwdRule::GroupSize => "ring_attention_spmd_fwd: every replica group must hold num_workers ranks",
            RingFwdRule::GroupRanks => "ring_attention_spmd_fwd: replica groups must name each rank 0..groups x num_workers exactly once",
            RingFwdRule::HeadDim => "ring_attention_spmd_fwd: the head dim must be within 1..=128",
            RingFwdRule::SeqlenMultiple => "ring_attention_spmd_fwd: the tokens per rank must be a positive multiple of 128",
            RingFwdRule::BatchHeads => "ring_attention_spmd_fwd: batch and heads must be positive",
            RingFwdRule::KvHeads => "ring_attention_spmd_fwd: kv_heads must be >= 1 and divide the query heads (GQA)",
            RingFwdRule::ScaleNotFinite => "ring_attention_spmd_fwd: softmax_scale must be a finite float32 value",
        }
    }
}

rules_of!(RingFwdConfig, RingFwdRule);

impl RingFwdConfig {
    /// The Python defaults for a ring of `num_workers`: non-causal, contiguous,
    /// no LSE, `q` and `k` d-major, scale `1/sqrt(d)`, one ring, trn2.
    pub const fn new(num_workers: i64) -> RingFwdConfig {
        RingFwdConfig {
            num_workers,
            causal: false,
            striped: false,
            zigzag: false,
            window: None,
            chunk_size: None,
            soft_cap: None,
            training: false,
            lse_dtype: Dtype::F32,
            tp_q: false,
            tp_k: false,
            softmax_scale: None,
            replica_groups: &[],
            dims: None,
            kv_heads: None,
            target: Generation::Trn2,
        }
    }

    /// Sets [`causal`](Self::causal).
    pub const fn causal(mut self, on: bool) -> Self {
        self.causal = on;
        self
    }

    /// Sets [`striped`](Self::striped).
    pub const fn striped(mut self, on: bool) -> Self {
        self.striped = on;
        self
    }

    /// Sets [`zigzag`](Self::zigzag).
    pub const fn zigzag(mut self, on: bool) -> Self {
        self.zigzag = on;
        self
    }

    /// Sets the layout: [`striped`](Self::striped) and [`zigzag`](Self::zigzag).
    pub const fn layout(mut self, layout: SeqLayout) -> Self {
        self.striped = matches!(layout, SeqLayout::Striped);
        self.zigzag = matches!(layout, SeqLayout::Zigzag);
        self
    }

    /// The layout the flags describe.
    pub const fn seq_layout(&self) -> SeqLayout {
        if self.zigzag {
            SeqLayout::Zigzag
        } else if self.striped {
            SeqLayout::Striped
        } else {
            SeqLayout::Contiguous
        }
    }

    /// Sets [`window`](Self::window) to `(left, right)`.
    pub const fn sliding_window(mut self, left: i64, right: i64) -> Self {
        self.window = Some((left, right));
        self
    }

    /// Sets [`soft_cap`](Self::soft_cap).
    pub const fn soft_cap(mut self, cap: f64) -> Self {
        self.soft_cap = Some(cap);
        self
    }

    /// Sets [`chunk_size`](Self::chunk_size).
    pub const fn chunk_size(mut self, size: i64) -> Self {
        self.chunk_size = Some(size);
        self
    }

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

    /// Sets [`softmax_scale`](Self::softmax_scale).
    pub const fn softmax_scale(mut self, scale: f64) -> Self {
        self.softmax_scale = Some(scale);
        self
    }

    /// Sets [`replica_groups`](Self::replica_groups).
    pub const fn replica_groups(mut self, groups: &'static [&'static [i64]]) -> Self {
        self.replica_groups = groups;
        self
    }

    /// Sets static per-rank shapes (checked against the limits).
    pub const fn dims(mut self, dims: RingDims) -> Self {
        self.dims = Some(dims);
        self
    }

    /// Sets [`kv_heads`](Self::kv_heads) (grouped-query attention).
    pub const fn kv_heads(mut self, kv_heads: i64) -> Self {
        self.kv_heads = Some(kv_heads);
        self
    }

    /// Sets the target generation.
    pub const fn target(mut self, target: Generation) -> Self {
        self.target = target;
        self
    }

    /// Number of rings.
    pub const fn rings(&self) -> usize {
        ring_count(self.replica_groups)
    }

    /// Ranks a launch needs: every ring's workers.
    pub const fn ranks(&self) -> usize {
        self.rings() * self.num_workers as usize
    }

    /// The first rule this configuration breaks.
    pub const fn violation(&self) -> Option<RingFwdRule> {
        if matches!(self.target, Generation::Trn1) {
            return Some(RingFwdRule::NeedsTrn2);
        }
        if self.num_workers < 1 {
            return Some(RingFwdRule::WorkersPositive);
        }
        if self.causal && self.num_workers > 32 {
            return Some(RingFwdRule::TooManyCausalWorkers);
        }
        if self.striped && !self.causal {
            return Some(RingFwdRule::StripedNeedsCausal);
        }
        if self.zigzag && !self.causal {
            return Some(RingFwdRule::ZigzagNeedsCausal);
        }
        if self.zigzag && self.striped {
            return Some(RingFwdRule::OneLayout);
        }
        if let Some((l, r)) = self.window
            && (l < 0 || r < 0)
        {
            return Some(RingFwdRule::WindowNegative);
        }
        if let Some(c) = self.chunk_size
            && c < 1
        {
            return Some(RingFwdRule::ChunkPositive);
        }
        if let Some(c) = self.soft_cap
            && !(c > 0.0 && is_finite_f32(c))
        {
            return Some(RingFwdRule::SoftCapPositive);
        }
        if let Some(scale) = self.softmax_scale
            && !is_finite_f32(scale)
        {
            return Some(RingFwdRule::ScaleNotFinite);
        }
        match group_problem(self.replica_groups, self.num_workers) {
            Some(GroupProblem::Size) => return Some(RingFwdRule::GroupSize),
            Some(GroupProblem::Ranks) => return Some(RingFwdRule::GroupRanks),
            None => {}
        }
        if let Some(kv) = self.kv_heads
            && kv < 1
        {
            return Some(RingFwdRule::KvHeads);
        }
        if let Some(d) = self.dims {
            if d.batch < 1 || d.heads < 1 {
                return Some(RingFwdRule::BatchHeads);
            }
            if let Some(kv) = self.kv_heads
                && d.heads % kv != 0
            {
                return Some(RingFwdRule::KvHeads);
            }
            if d.head_dim < 1 || d.head_dim > 128 {
                return Some(RingFwdRule::HeadDim);
            }
            if d.seqlen < 128 || d.seqlen % 128 != 0 {
                return Some(RingFwdRule::SeqlenMultiple);
            }
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
