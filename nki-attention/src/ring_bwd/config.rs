//! The typed configuration of `ring_attention_spmd_bwd`, whose rules are checked
//! at compile time when the configuration is a constant (see
//! [`ring_bwd_config!`](crate::ring_bwd_config)).

use crate::ring_fwd::RingDims;
use crate::rings::{GroupProblem, group_problem, ring_count};
use crate::scale::{is_finite_f32, keeps_masks};
use crate::shard::SeqLayout;
use nki::Dtype;
use nki::hw::Generation;

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
    /// Ranks in each ring.
    pub num_workers: i64,
    /// Causal mask over global positions.
    pub causal: bool,
    /// Rank `r` holds the tokens `t` with `t mod num_workers == r` (else contiguous blocks).
    pub striped: bool,
    /// Rank `r` holds chunks `r` and `2W-1-r` of `S / 2` tokens (zigzag; needs the causal mask).
    pub zigzag: bool,
    /// Sliding window `(L, R)`: key `j` visible to query `i` only if `i - L <= j <= i + R`.
    pub window: Option<(i64, i64)>,
    /// Chunked attention: key `j` visible to query `i` only if `i / C == j / C`.
    pub chunk_size: Option<i64>,
    /// Logit soft cap `C > 0`: logits `C·tanh(scale·q·k / C)`.
    pub soft_cap: Option<f64>,
    /// Segment ids are given (their tiles count in the SBUF footprint; the
    /// launch sets it from its inputs).
    pub segment_ids: bool,
    /// fp32 accumulators, `-LSE` and `D` (else the input dtype).
    pub mixed_precision: bool,
    /// Softmax scale (default `1/sqrt(d)`), applied inside: Q is unscaled. A finite
    /// float32 value; at least [`MIN_MASKED_SCALE`](crate::scale::MIN_MASKED_SCALE)
    /// with the causal mask, of either sign without it.
    pub softmax_scale: Option<f64>,
    /// The LNC degree the kernel runs with (`lnc_size`).
    pub lnc: i64,
    /// The rings, in send order (empty: one ring of `num_workers` ranks `0..num_workers`).
    pub replica_groups: &'static [&'static [i64]],
    /// Static per-rank shapes, checked against the tiling rules when given.
    pub dims: Option<RingDims>,
    /// The dtype of q, k, v, o and dy, when known: with `dims` it sizes the SBUF
    /// footprint (see [`max_seqlen`](Self::max_seqlen)).
    pub dtype: Option<Dtype>,
    /// K/V heads for grouped-query attention (None: as many as the query heads);
    /// dK and dV come back with this many heads, summed over each group.
    pub kv_heads: Option<i64>,
    /// The generation the kernel targets: its SBUF bounds the tokens per rank.
    pub target: Generation,
}

/// One rule of `ring_attention_spmd_bwd` (the library's asserts and what it
/// leaves unchecked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingBwdRule {
    /// B1: striped input needs the causal mask.
    StripedNeedsCausal,
    /// At least one worker.
    WorkersPositive,
    /// Every replica group holds `num_workers` ranks.
    GroupSize,
    /// Rank ids are distinct, non-negative and cover `0..ranks`.
    GroupRanks,
    /// B7: the LNC degree is 1 or 2.
    LncSize,
    /// Batch and heads positive.
    BatchHeads,
    /// GQA: at least one KV head, and the query heads a multiple of them.
    KvHeads,
    /// B2: tokens per rank a positive multiple of 128.
    SeqlenMultiple,
    /// B4: the head dim splits into equal tiles of at most 128.
    HeadDimTiles,
    /// Not checked by the library: the softmax scale is a finite float32 value.
    ScaleNotFinite,
    /// Not checked by the library: with a mask, masked scores hold FLOAT32_MIN
    /// and `exp(scale·s − LSE)` multiplies them by the scale.
    CausalScale,
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
    /// K, V, dK and dV of the whole slice, and the step's tiles, fit one SBUF
    /// partition of the target (the library leaves this unchecked).
    SbufCapacity,
}

impl RingBwdRule {
    /// The rule in words (a `const` string, usable in compile-time panics).
    pub const fn message(self) -> &'static str {
        match self {
            RingBwdRule::StripedNeedsCausal => "ring_attention_spmd_bwd: striped_attention requires use_causal_mask",
            RingBwdRule::WorkersPositive => "ring_attention_spmd_bwd: num_workers must be >= 1",
            RingBwdRule::GroupSize => "ring_attention_spmd_bwd: every replica group must hold num_workers ranks",
            RingBwdRule::GroupRanks => "ring_attention_spmd_bwd: replica groups must name each rank 0..groups x num_workers exactly once",
            RingBwdRule::LncSize => "ring_attention_spmd_bwd: lnc_size must be 1 or 2",
            RingBwdRule::BatchHeads => "ring_attention_spmd_bwd: batch and heads must be positive",
            RingBwdRule::KvHeads => "ring_attention_spmd_bwd: kv_heads must be >= 1 and divide the query heads (GQA)",
            RingBwdRule::SeqlenMultiple => "ring_attention_spmd_bwd: the tokens per rank must be a positive multiple of 128",
            RingBwdRule::HeadDimTiles => {
                "ring_attention_spmd_bwd: the head dim must split into equal tiles of at most 128 (e.g. 192 = 2 x 96; a prime above 128 cannot)"
            }
            RingBwdRule::ScaleNotFinite => "ring_attention_spmd_bwd: softmax_scale must be a finite float32 value",
            RingBwdRule::CausalScale => {
                "ring_attention_spmd_bwd: with a mask (causal, window, chunks) the softmax_scale must be at least 1e-30: masked scores are FLOAT32_MIN and exp(scale x score - lse) scales them too, so a zero, negative or smaller scale unmasks them"
            }
            RingBwdRule::ZigzagNeedsCausal => "ring_attention_spmd_bwd: zigzag_attention requires use_causal_mask",
            RingBwdRule::OneLayout => "ring_attention_spmd_bwd: striped_attention and zigzag_attention exclude each other",
            RingBwdRule::WindowNegative => "ring_attention_spmd_bwd: the sliding window sizes (L, R) must be >= 0",
            RingBwdRule::ChunkPositive => "ring_attention_spmd_bwd: chunk_size must be >= 1",
            RingBwdRule::SoftCapPositive => "ring_attention_spmd_bwd: soft_cap must be a positive finite float32 value",
            RingBwdRule::SbufCapacity => {
                "ring_attention_spmd_bwd: K, V, dK and dV of the whole slice stay in SBUF, so the tokens per rank must fit the target's SBUF partition (see RingBwdConfig::max_seqlen)"
            }
        }
    }
}

rules_of!(RingBwdConfig, RingBwdRule);

/// Equal head-dim tiles of at most 128: `(size, count)` (the kernel's `head_tiles`).
pub(crate) const fn head_tiles(dh: i64) -> (i64, i64) {
    let n = (dh + 127) / 128;
    ((dh + n - 1) / n, n)
}

impl RingBwdConfig {
    /// The Python defaults for a ring of `num_workers`: non-causal, contiguous,
    /// mixed precision, scale `1/sqrt(d)`, LNC1, one ring.
    pub const fn new(num_workers: i64) -> RingBwdConfig {
        RingBwdConfig {
            num_workers,
            causal: false,
            striped: false,
            zigzag: false,
            window: None,
            chunk_size: None,
            soft_cap: None,
            segment_ids: false,
            mixed_precision: true,
            softmax_scale: None,
            lnc: 1,
            replica_groups: &[],
            dims: None,
            dtype: None,
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

    /// Sets [`lnc`](Self::lnc).
    pub const fn lnc(mut self, lnc: i64) -> Self {
        self.lnc = lnc;
        self
    }

    /// Sets [`replica_groups`](Self::replica_groups).
    pub const fn replica_groups(mut self, groups: &'static [&'static [i64]]) -> Self {
        self.replica_groups = groups;
        self
    }

    /// Sets [`kv_heads`](Self::kv_heads) (grouped-query attention).
    pub const fn kv_heads(mut self, kv_heads: i64) -> Self {
        self.kv_heads = Some(kv_heads);
        self
    }

    /// Sets static per-rank shapes (checked against the tiling rules).
    pub const fn dims(mut self, dims: RingDims) -> Self {
        self.dims = Some(dims);
        self
    }

    /// Sets the input [`dtype`](Self::dtype).
    pub const fn dtype(mut self, dtype: Dtype) -> Self {
        self.dtype = Some(dtype);
        self
    }

    /// Sets the [`target`](Self::target) generation.
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

    /// Whether any mask applies (causal, window, chunks or zigzag blocks).
    pub const fn masked(&self) -> bool {
        self.causal || self.zigzag || self.window.is_some() || self.chunk_size.is_some()
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

    /// Sets [`window`](Self::window) to `(left, right)`.
    pub const fn sliding_window(mut self, left: i64, right: i64) -> Self {
        self.window = Some((left, right));
        self
    }

    /// Sets [`segment_ids`](Self::segment_ids).
    pub const fn segment_ids(mut self, on: bool) -> Self {
        self.segment_ids = on;
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

    /// The first rule this configuration breaks.
    pub const fn violation(&self) -> Option<RingBwdRule> {
        if self.striped && !self.causal {
            return Some(RingBwdRule::StripedNeedsCausal);
        }
        if self.zigzag && !self.causal {
            return Some(RingBwdRule::ZigzagNeedsCausal);
        }
        if self.zigzag && self.striped {
            return Some(RingBwdRule::OneLayout);
        }
        if let Some((l, r)) = self.window
            && (l < 0 || r < 0)
        {
            return Some(RingBwdRule::WindowNegative);
        }
        if let Some(c) = self.chunk_size
            && c < 1
        {
            return Some(RingBwdRule::ChunkPositive);
        }
        if let Some(c) = self.soft_cap
            && !(c > 0.0 && is_finite_f32(c))
        {
            return Some(RingBwdRule::SoftCapPositive);
        }
        if self.num_workers < 1 {
            return Some(RingBwdRule::WorkersPositive);
        }
        match group_problem(self.replica_groups, self.num_workers) {
            Some(GroupProblem::Size) => return Some(RingBwdRule::GroupSize),
            Some(GroupProblem::Ranks) => return Some(RingBwdRule::GroupRanks),
            None => {}
        }
        if self.lnc < 1 || self.lnc > 2 {
            return Some(RingBwdRule::LncSize);
        }
        if let Some(scale) = self.softmax_scale {
            if !is_finite_f32(scale) {
                return Some(RingBwdRule::ScaleNotFinite);
            }
            if self.masked() && !keeps_masks(scale) {
                return Some(RingBwdRule::CausalScale);
            }
        }
        if let Some(kv) = self.kv_heads
            && kv < 1
        {
            return Some(RingBwdRule::KvHeads);
        }
        if let Some(d) = self.dims {
            if d.batch < 1 || d.heads < 1 {
                return Some(RingBwdRule::BatchHeads);
            }
            if let Some(kv) = self.kv_heads
                && d.heads % kv != 0
            {
                return Some(RingBwdRule::KvHeads);
            }
            if d.seqlen < 128 || d.seqlen % 128 != 0 {
                return Some(RingBwdRule::SeqlenMultiple);
            }
            if d.head_dim < 1 || d.head_dim % head_tiles(d.head_dim).0 != 0 {
                return Some(RingBwdRule::HeadDimTiles);
            }
        }
        if let Some(bytes) = self.sbuf_bytes()
            && bytes > self.sbuf_capacity()
        {
            return Some(RingBwdRule::SbufCapacity);
        }
        None
    }
}

/// A checked [`RingBwdConfig`] constant: breaking one of the kernel's rules is a
/// compile error naming the rule.
///
/// ```
/// use nki_attention::{ring_bwd_config, ring_bwd::RingBwdConfig};
/// use nki_attention::ring_fwd::RingDims;
/// const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 192 };
/// let cfg = ring_bwd_config!(RingBwdConfig::new(4).dims(DIMS));
/// assert!(cfg.violation().is_none());
/// ```
#[macro_export]
macro_rules! ring_bwd_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::ring_bwd::RingBwdConfig, $cfg)
    };
}
