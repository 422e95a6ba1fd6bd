//! `ring_attention_spmd_fwd`: context-parallel attention over a ring of workers,
//! written in the DSL on top of [`attention_cte`].
//!
//! Algorithm. Every rank keeps its queries; keys and values travel to the ring
//! successor one step at a time (two HBM buffers per tensor, alternating between
//! "arrived" and "free"). Each step runs `attention_cte` with cached,
//! unnormalised statistics; the step's output merges into the running one by
//! online softmax on negated maxima, in bf16 tiles as the library does, and the
//! last step normalises and writes the log-sum-exp. The permute for step `s + 1`
//! is issued before the merge of step `s`, so on the device the transfer
//! overlaps the merge.
//!
//! ```text
//! checks, the ring's features and positions            (check_shapes, ring_features, ring_tensors)
//! RingFwdAttnConfig with the LNC shard plan
//! cp_offset, query positions, key bounds of step 0      (setup_ring_impl)
//! step 0: the own keys                                  (own_step_impl -> step_attention)
//! own K, V (and key ids) into the send buffers, permute (start_kv_ring)
//! for each ring step 1..=last:                          (ring_step_impl)
//!     zigzag: two unmasked half-size attention_cte      (zigzag_step)
//!     else: cp_offset or key bounds, attention_cte      (step_attention)
//!     the next block goes out, then
//!     for each batch of this LNC program:               (merge_impl)
//!         c = exp(n - n_x), O = O_acc c_acc + O_cur c_cur per tile of P_MAX groups
//! for each batch of this LNC program:                   (write_back_impl)
//!     O / S and the log-sum-exp -n + ln S
//! ```
//!
//! Tiling: statistics are `[P_MAX, S / Q_GRP_SZ]` (row `Q_GRP_SZ g + p` at `[p, g]`,
//! `attention_cte`'s layout); outputs merge and normalise in tiles of up to
//! MERGE_GRP_TILES groups of Q_GRP_SZ rows; the pre-scaled copy of Q moves
//! SCALE_COPY_COLS columns of `[P_MAX, ..]` at a time.
//!
//! Grouped-query attention: K and V hold `h_kv` heads (query head `i` reads KV
//! head `i / (h / h_kv)`, as `attention_cte` does), and only those heads travel,
//! so a step moves `h_kv / h` of the multi-head bytes. Sinks (`[h]`, one logit per
//! query head) enter the softmax denominator through step 0's `attention_cte`
//! only: the online-softmax merges carry them, so they count once whatever `W`.
//!
//! Segment ids mask inside `attention_cte`; the key ids travel with K and V. A
//! row that sees no key in any step keeps the sentinel statistics and is written
//! as zeros with LSE `-inf`.

use nki::prelude::*;

pub use ring_fwd::*;

/// The kernel with its tile constants, its state bundles and its phase helpers.
#[nki_module]
pub mod ring_fwd {
    use crate::cte::attention_cte::{MAX_HEAD_DIM, Q_GRP_SZ, ScoreFeatures, attention_cte, remainder_groups};
    use crate::ring_features::{
        P_MAX, RingAttnFeatures, RingTensors, RingWindow, bias_block, check_feature_inputs, pass_optional, ring_features,
        ring_positions_at, ring_tensors, softmax_scale_of,
    };
    use crate::ring_masks::{key_bounds, last_needed_step, row_positions, step_needed};
    use nki::prelude::*;

    /// Query groups merged or normalised per tile (`[P_MAX, MERGE_GRP_TILES, d]` bf16).
    pub const MERGE_GRP_TILES: i64 = 128;
    /// Columns of `[P_MAX, ..]` per tile of the pre-scaled copy of Q.
    pub const SCALE_COPY_COLS: i64 = 2048;
    /// The most workers a causal ring supports (`attention_cte`'s CP degree limit).
    pub const MAX_CAUSAL_WORKERS: i64 = 32;
    /// The statistics' negated-max sentinel of a row that saw no key is
    /// FLOAT32_MAX; anything below this saw one.
    pub const SEEN_THRESHOLD: f64 = 1.0e30;
    /// `RingFwdRule::NeedsTrn2`: the one message of the kernel's assert, the typed
    /// API's checks (compile time and run time) and the CLI (the rules both passes
    /// share have theirs in ring_rules).
    pub const NEEDS_TRN2: &str = "ring_attention_spmd_fwd: needs Trainium2 or later (trn1 is not supported)";
    /// `RingFwdRule::TooManyCausalWorkers`, one message as above.
    pub const TOO_MANY_CAUSAL_WORKERS: &str =
        "ring_attention_spmd_fwd: the causal mask supports at most 32 workers (attention_cte's global_cp_deg)";
    /// `RingFwdRule::HeadDim`, one message as above.
    pub const HEAD_DIM: &str = "ring_attention_spmd_fwd: the head dim must be within 1..=128";

    /// The shapes and flags of one call, with the LNC shard plan.
    #[nki_object]
    pub struct RingFwdAttnConfig {
        /// Query batch (batch × heads).
        pub bs: i64,
        /// KV batch (batch × KV heads).
        pub bs_kv: i64,
        /// Tokens per rank.
        pub seqlen: i64,
        /// Head dimension.
        pub d: i64,
        /// Query groups per batch.
        pub n_grp: i64,
        /// The ring and its masks (shared with the backward).
        pub ring: RingAttnFeatures,
        /// `q` is `[b, h, seqlen, d]` (else `[b, h, d, seqlen]`).
        pub tp_q: bool,
        /// `k` is `[b, h_kv, seqlen, d]` (else `[b, h_kv, d, seqlen]`).
        pub tp_k: bool,
        /// The scale `attention_cte` applies (1.0 when Q is pre-scaled).
        pub attn_scale: f64,
        /// `attention_cte`'s CP causal mask (causal without bounds).
        pub cte_causal: bool,
        /// On its own block a zigzag rank's causal mask is the local one.
        pub local_causal: bool,
        /// Zigzag steps as two unmasked half-size `attention_cte` calls.
        pub zigzag_fast: bool,
        /// The last ring step any rank needs.
        pub last: i64,
        /// The dtype of the log-sum-exp.
        pub lse_dtype: Dtype,
        /// This LNC program.
        pub shard: i64,
        /// LNC programs.
        pub shards: i64,
        /// Whole query batches per program.
        pub per_shard: i64,
        /// The groups `[rem_g0, rem_g1)` of the odd last batch this program merges.
        pub rem_g0: i64,
        /// End of this program's groups of the odd last batch.
        pub rem_g1: i64,
    }

    /// The call's HBM tensors: the inputs as `attention_cte` takes them, the outputs as allocated.
    #[nki_object]
    pub struct RingFwdTensors {
        /// Queries `[bs, d, S]` (`[bs, S, d]` with `tp_q`), pre-scaled when bounded and not causal.
        pub q: Tensor,
        /// Own keys `[bs_kv, d, S]` (`[bs_kv, S, d]` with `tp_k`).
        pub k: Tensor,
        /// Own values `[bs_kv, S, d]`.
        pub v: Tensor,
        /// The output `[bs, S, d]`.
        pub o: Tensor,
        /// The log-sum-exp `[bs, P_MAX, S / Q_GRP_SZ]` (training).
        pub lse: Option<Tensor>,
        /// Sink logits per query batch, `[bs, 1]`.
        pub sink: Option<Tensor>,
        /// The segment ids, the bias and the ring positions (as the backward's).
        pub ring: RingTensors,
    }

    /// The per-step inputs of the ring: masks written before each step.
    #[nki_object]
    pub struct RingFwdState {
        /// The queries' global positions per row, `[P_MAX, S / Q_GRP_SZ]`.
        pub q_pos: Tensor,
        /// This rank's ring position, `(P_MAX, 1)`.
        pub own_pos: Tensor,
        /// The second half of the queries (zigzag steps).
        pub q_second: Tensor,
        /// CP offset `(1, 1)` for the contiguous and striped causal steps.
        pub cp_offset: Option<Tensor>,
        /// Lower key bound per query row, `[bs, S, 1]`.
        pub bound_min: Option<Tensor>,
        /// Upper key bound per query row, `[bs, S, 1]`.
        pub bound_max: Option<Tensor>,
    }

    /// One side of the KV ring buffers (or a step's block of keys).
    #[nki_object]
    pub struct KvBlock {
        /// Keys, as `RingFwdTensors::k`.
        pub k: Tensor,
        /// Values, as `RingFwdTensors::v`.
        pub v: Tensor,
        /// Key segment ids `[b, S]`.
        pub ids: Option<Tensor>,
    }

    /// An unnormalised output with its statistics (running, or one step's).
    #[nki_object]
    pub struct RunningStats {
        /// Output `[bs, S, d]`, unnormalised.
        pub o: Tensor,
        /// Negated row max `[bs, P_MAX, S / Q_GRP_SZ]`.
        pub neg_max: Tensor,
        /// Row sum, like `neg_max`.
        pub sum: Tensor,
    }

    /// The masking arguments of one `attention_cte` call.
    #[nki_object]
    pub struct StepMasks {
        /// Multiplies `QKᵀ`.
        pub scale: f64,
        /// `attention_cte`'s causal mask.
        pub causal: bool,
        /// CP offset.
        pub cp_offset: Option<Tensor>,
        /// CP degree.
        pub cp_deg: Option<i64>,
        /// Striped CP.
        pub striped: bool,
        /// Sink logits.
        pub sink: Option<Tensor>,
        /// Lower key bounds.
        pub bound_min: Option<Tensor>,
        /// Upper key bounds.
        pub bound_max: Option<Tensor>,
        /// Query segment ids.
        pub q_segment_ids: Option<Tensor>,
        /// Key segment ids.
        pub kv_segment_ids: Option<Tensor>,
        /// Bias of the local queries against the step's keys.
        pub bias: Option<Tensor>,
    }

    /// One ring step's `attention_cte`: the unnormalised output and the raw statistics
    /// (negated max, sum) of the queries `q` against `k` and `v`.
    #[nki_helper]
    fn step_attention(cfg: RingFwdAttnConfig, q: Hbm, k: Hbm, v: Hbm, m: StepMasks) -> RunningStats {
        let (o, neg_max, sum): (Hbm, Hbm, Hbm) = attention_cte(
            q,
            k,
            v,
            scale = m.scale,
            causal_mask = m.causal,
            tp_q = cfg.tp_q,
            tp_k = cfg.tp_k,
            sink = m.sink,
            tp_out = false,
            cache_softmax = true,
            cp_offset = m.cp_offset,
            global_cp_deg = m.cp_deg,
            cp_striped_input = m.striped,
            bound_min = m.bound_min,
            bound_max = m.bound_max,
            skip_output_normalization = true,
            soft_cap = cfg.ring.soft_cap,
            q_segment_ids = m.q_segment_ids,
            kv_segment_ids = m.kv_segment_ids,
            bias = m.bias,
        );
        RunningStats { o, neg_max, sum }
    }

    /// The masks of a step on the ring's layout: `attention_cte`'s CP causal mask
    /// or the key bounds, the query ids, and the step's sink, key ids and bias.
    #[nki_helper]
    fn ring_masks(
        cfg: RingFwdAttnConfig,
        io: RingFwdTensors,
        st: RingFwdState,
        sink: Option<Hbm>,
        kv_ids: Option<Hbm>,
        bias: Option<Hbm>,
    ) -> StepMasks {
        StepMasks {
            scale: cfg.attn_scale,
            causal: cfg.cte_causal,
            cp_offset: st.cp_offset,
            cp_deg: if cfg.cte_causal { Some(cfg.ring.num_workers) } else { None },
            striped: cfg.ring.striped && !cfg.ring.bounded,
            sink,
            bound_min: st.bound_min,
            bound_max: st.bound_max,
            q_segment_ids: io.ring.q_segment_ids,
            kv_segment_ids: kv_ids,
            bias,
        }
    }

    /// No mask at all, scale 1 (the zigzag steps' half-size calls on pre-scaled Q).
    #[nki_helper]
    fn unmasked() -> StepMasks {
        StepMasks {
            scale: 1.0,
            causal: false,
            cp_offset: None,
            cp_deg: None,
            striped: false,
            sink: None,
            bound_min: None,
            bound_max: None,
            q_segment_ids: None,
            kv_segment_ids: None,
            bias: None,
        }
    }

    /// `q3 · scale` in this program's HBM, in `q3`'s dtype (fp32 products): the
    /// bounds path of `attention_cte` applies no scale.
    #[nki_helper]
    fn scaled_copy(q3: Hbm, scale: f64) -> Hbm {
        let shape = q3.shape();
        let out = nl::ndarray(shape, q3.dtype(), buffer = nl::private_hbm);
        let cols = shape[0] * shape[1] * shape[2] / P_MAX;
        let src = q3.reshape([P_MAX, cols]);
        let dst = out.reshape([P_MAX, cols]);
        for c0 in (0..cols).step_by(SCALE_COPY_COLS) {
            let c1 = (c0 + SCALE_COPY_COLS).min(cols);
            let t = nl::ndarray([P_MAX, c1 - c0], nl::float32, buffer = nl::sbuf);
            nisa::dma_copy(t, src[s![.., c0..c1]]);
            let r = nl::ndarray([P_MAX, c1 - c0], q3.dtype(), buffer = nl::sbuf);
            nisa::tensor_scalar(r, t, nl::multiply, scale);
            nisa::dma_copy(dst[s![.., c0..c1]], r);
        }
        out
    }

    /// Writes the per-row key bounds of one step (`[P_MAX, S / Q_GRP_SZ]`, row
    /// `Q_GRP_SZ g + p` at `[p, g]`) for every batch of the state's `bound_min` /
    /// `bound_max` (`[bs, S, 1]`), for the keys of ring position `k_pos`.
    #[nki_helper]
    fn store_bounds(cfg: RingFwdAttnConfig, st: RingFwdState, k_pos: Sbuf) {
        let (bound_min, bound_max) = (st.bound_min, st.bound_max);
        if let Some(bmin) = bound_min {
            if let Some(bmax) = bound_max {
                let s = cfg.seqlen;
                let (lower, upper): (Sbuf, Sbuf) = key_bounds(st.q_pos, k_pos, cfg.ring, s);
                for bi in 0..cfg.bs {
                    nisa::dma_copy(bmin.ap([[1, Q_GRP_SZ], [Q_GRP_SZ, cfg.n_grp]], offset = bi * s), lower);
                    nisa::dma_copy(bmax.ap([[1, Q_GRP_SZ], [Q_GRP_SZ, cfg.n_grp]], offset = bi * s), upper);
                }
            }
        }
    }

    /// The per-batch sink logits `attention_cte` takes, `[b·h, 1]` fp32 in this
    /// program's HBM: batch `bi` holds `sinks[bi mod h]` (None without sinks).
    #[nki_helper]
    fn sink_rows(sinks: Option<Hbm>, b: i64, h: i64) -> Option<Hbm> {
        if let Some(sk) = sinks {
            let rows = nl::ndarray([b * h, 1], nl::float32, buffer = nl::private_hbm);
            let staged = nl::ndarray([1, h], nl::float32, buffer = nl::sbuf);
            nisa::dma_copy(staged, sk.reshape([1, h]));
            for bi in 0..b {
                nisa::dma_copy(rows.ap([[h, 1], [1, h]], offset = bi * h), staged);
            }
            return Some(rows);
        }
        None
    }

    /// Half `half_at` of the sequence axis of `src` (`[n, a, S]`, or `[n, S, a]` when
    /// `seq_major`) copied to this program's HBM: half `fixed` when `sel` is None,
    /// else half `sel` (a one-element int32 tile holding 0 or 1, read at run time).
    #[nki_helper]
    fn seq_half(src: Hbm, seq_major: bool, fixed: i64, sel: Option<Sbuf>) -> Hbm {
        let [n, x, y] = src.shape();
        let (a, s) = if seq_major { (y, x) } else { (x, y) };
        let half = s / 2;
        let out_shape = if seq_major { [n, half, a] } else { [n, a, half] };
        let out = nl::ndarray(out_shape, src.dtype(), buffer = nl::private_hbm);
        let halves = if seq_major { src.reshape([n, 2, half, a]) } else { src.reshape([n, a, 2, half]) };
        let pattern = if seq_major { [[a, half], [1, a]] } else { [[s, a], [1, half]] };
        let step = if seq_major { half * a } else { half };
        let axis = if seq_major { 1 } else { 2 };
        for i in 0..n {
            let start = i * a * s + fixed * step;
            if let Some(t) = sel {
                nisa::dma_copy(out[s![i, .., ..]], halves.ap(pattern, offset = start, scalar_offset = t, indirect_dim = axis));
            } else {
                nisa::dma_copy(out[s![i, .., ..]], halves.ap(pattern, offset = start));
            }
        }
        out
    }

    /// Copies between the running statistics and output of one sequence half (`half`
    /// 0 or 1 at run time in `sel`) and the half-size `part`, for batches `b0..b1`:
    /// `to_half` copies the half out, else back in.
    #[nki_helper]
    fn swap_half(acc: RunningStats, part: RunningStats, sel: Sbuf, b0: i64, b1: i64, to_half: bool) {
        let [bs, s, d] = acc.o.shape();
        let n_grp = s / Q_GRP_SZ;
        let hg = n_grp / 2;
        let o_halves = acc.o.reshape([bs, 2, s / 2, d]);
        let nm_halves = acc.neg_max.reshape([bs, P_MAX, 2, hg]);
        let sum_halves = acc.sum.reshape([bs, P_MAX, 2, hg]);
        for bi in b0..b1 {
            let o_view = o_halves.ap([[d, s / 2], [1, d]], offset = bi * s * d, scalar_offset = sel, indirect_dim = 1);
            let nm_view = nm_halves.ap([[n_grp, P_MAX], [1, hg]], offset = bi * P_MAX * n_grp, scalar_offset = sel, indirect_dim = 2);
            let sum_view = sum_halves.ap([[n_grp, P_MAX], [1, hg]], offset = bi * P_MAX * n_grp, scalar_offset = sel, indirect_dim = 2);
            if to_half {
                nisa::dma_copy(part.o[s![bi, .., ..]], o_view);
                nisa::dma_copy(part.neg_max[s![bi, .., ..]], nm_view);
                nisa::dma_copy(part.sum[s![bi, .., ..]], sum_view);
            } else {
                nisa::dma_copy(o_view, part.o[s![bi, .., ..]]);
                nisa::dma_copy(nm_view, part.neg_max[s![bi, .., ..]]);
                nisa::dma_copy(sum_view, part.sum[s![bi, .., ..]]);
            }
        }
    }

    /// Merges one half-size `attention_cte` result `cur` (for the query half in
    /// `sel`) into the running one, for batches `b0..b1`.
    #[nki_helper]
    fn merge_half(acc: RunningStats, cur: RunningStats, sel: Sbuf, b0: i64, b1: i64) {
        let [bs, s, d] = acc.o.shape();
        let hg = s / (2 * Q_GRP_SZ);
        let part = RunningStats {
            o: nl::ndarray([bs, s / 2, d], acc.o.dtype(), buffer = nl::private_hbm),
            neg_max: nl::ndarray([bs, P_MAX, hg], nl::float32, buffer = nl::private_hbm),
            sum: nl::ndarray([bs, P_MAX, hg], nl::float32, buffer = nl::private_hbm),
        };
        swap_half(acc, part, sel, b0, b1, true);
        for bi in b0..b1 {
            merge_impl(part, cur, bi, 0, hg);
        }
        swap_half(acc, part, sel, b0, b1, false);
    }

    /// Waits for both LNC programs' writes to `stats` (no-op on one program).
    #[nki_helper]
    fn both_programs(stats: RunningStats, shards: i64) {
        if shards > 1 {
            nisa::core_barrier(stats.o, [0, 1]);
            nisa::core_barrier(stats.neg_max, [0, 1]);
            nisa::core_barrier(stats.sum, [0, 1]);
        }
    }

    /// One zigzag causal step without a window or chunks. The arriving block holds
    /// chunks `p` and `2W-1-p`; this rank's queries chunks `me` and `2W-1-me`. Every
    /// second-chunk query sees the whole first chunk of the block; the remaining
    /// visible quarter is the first chunks of both (`p < me`) or the second chunks of
    /// both (`p > me`), all visible too. So two unmasked half-size `attention_cte`
    /// calls do exactly the visible work; `sel` (int32, 1 when `p > me`) picks the
    /// halves of the second call at run time. Batches are merged whole by program
    /// `bi mod shards`, after barriers on `attention_cte`'s outputs.
    #[nki_helper]
    fn zigzag_step(cfg: RingFwdAttnConfig, io: RingFwdTensors, st: RingFwdState, arrived: KvBlock, acc: RunningStats, sel: Sbuf) {
        let (bs, shards) = (cfg.bs, cfg.shards);
        let per = (bs + shards - 1) / shards;
        let b0 = (cfg.shard * per).min(bs);
        let b1 = (b0 + per).min(bs);
        let k_first: Hbm = seq_half(arrived.k, cfg.tp_k, 0, None);
        let v_first: Hbm = seq_half(arrived.v, true, 0, None);
        let none: StepMasks = unmasked();
        let first: RunningStats = step_attention(cfg, st.q_second, k_first, v_first, none);
        both_programs(first, shards);
        let second = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::memset(second, 1.0);
        merge_half(acc, first, second, b0, b1);
        let q_x: Hbm = seq_half(io.q, cfg.tp_q, 0, Some(sel));
        let k_x: Hbm = seq_half(arrived.k, cfg.tp_k, 0, Some(sel));
        let v_x: Hbm = seq_half(arrived.v, true, 0, Some(sel));
        let cross: RunningStats = step_attention(cfg, q_x, k_x, v_x, none);
        both_programs(cross, shards);
        merge_half(acc, cross, sel, b0, b1);
    }

    /// [`bias_block`] of the keys of ring position `kpos`, when there is a bias.
    #[nki_helper]
    fn step_bias(cfg: RingFwdAttnConfig, io: RingFwdTensors, kpos: Sbuf) -> Option<Hbm> {
        if let Some(bi) = io.ring.bias {
            let [b, h, _s, _total] = bi.shape();
            return Some(bias_block(bi, 0, b * h, kpos, cfg.ring));
        }
        None
    }

    /// Sends the keys and values that arrived to the ring successor's free
    /// buffers, and their segment ids when there are any.
    #[nki_helper]
    fn pass_on(arrived: KvBlock, free: KvBlock, groups: Groups) {
        let rg = ncc::ReplicaGroup(groups);
        ncc::collective_permute_implicit([[arrived.k]], [[free.k]], rg);
        ncc::collective_permute_implicit([[arrived.v]], [[free.v]], rg);
        pass_optional(arrived.ids, free.ids, groups);
    }

    /// Loads the `(P_MAX, g1 - g0)` statistics of query groups `[g0, g1)` of
    /// batch `b`: only this program's groups (the other LNC program may be
    /// writing its own columns of the batch).
    #[nki_helper]
    fn load_stats(src: Hbm, b: i64, g0: i64, g1: i64) -> Sbuf {
        let t = nl::ndarray([P_MAX, g1 - g0], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(t, src[s![b, .., g0..g1]]);
        t
    }

    /// Merges a step's output `cur` into the running `acc` for query groups
    /// `[g0, g1)` of batch `b`: `n = min(n_acc, n_cur)`, `c = exp(n - n_x)`,
    /// `S = S_acc c_acc + S_cur c_cur`, `O = O_acc c_acc + O_cur c_cur` (negated
    /// maxima; a row that saw no key this step has `n_cur = +FLOAT32_MAX` and weight 0).
    #[nki_helper]
    fn merge_impl(acc: RunningStats, cur: RunningStats, b: i64, g0: i64, g1: i64) {
        let [_bs, s, d] = acc.o.shape();
        let groups = g1 - g0;
        let nm_a: Sbuf = load_stats(acc.neg_max, b, g0, g1);
        let sum_a: Sbuf = load_stats(acc.sum, b, g0, g1);
        let nm_c: Sbuf = load_stats(cur.neg_max, b, g0, g1);
        let sum_c: Sbuf = load_stats(cur.sum, b, g0, g1);
        let nm_new = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(nm_new, nm_a, nm_c, nl::minimum);
        let c_acc = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(c_acc, nm_new, nm_a, nl::subtract);
        nisa::activation(c_acc, nl::exp, c_acc);
        let c_cur = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(c_cur, nm_new, nm_c, nl::subtract);
        nisa::activation(c_cur, nl::exp, c_cur);
        let sum_new = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(sum_new, sum_a, c_acc, nl::multiply);
        let sum_part = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(sum_part, sum_c, c_cur, nl::multiply);
        nisa::tensor_tensor(sum_new, sum_new, sum_part, nl::add);

        // Outputs in tiles of up to MERGE_GRP_TILES groups: row Q_GRP_SZ t + p of the batch at [p, t, :].
        for t0 in (g0..g1).step_by(MERGE_GRP_TILES) {
            let t1 = (t0 + MERGE_GRP_TILES).min(g1);
            let tc = t1 - t0;
            let prev = nl::ndarray([P_MAX, tc, d], nl::bfloat16, buffer = nl::sbuf);
            nisa::dma_copy(prev, group_rows(acc.o, b, s, d, t0, t1));
            let cur_o = nl::ndarray([P_MAX, tc, d], nl::bfloat16, buffer = nl::sbuf);
            nisa::dma_copy(cur_o, group_rows(cur.o, b, s, d, t0, t1));
            let merged = nl::ndarray([P_MAX, tc, d], nl::bfloat16, buffer = nl::sbuf);
            nisa::tensor_tensor(merged, prev, c_acc[s![.., t0 - g0..t1 - g0]].expand_dim(2).broadcast(2, d), nl::multiply);
            let part = nl::ndarray([P_MAX, tc, d], nl::bfloat16, buffer = nl::sbuf);
            nisa::tensor_tensor(part, cur_o, c_cur[s![.., t0 - g0..t1 - g0]].expand_dim(2).broadcast(2, d), nl::multiply);
            nisa::tensor_tensor(merged, merged, part, nl::add);
            nisa::dma_copy(group_rows(acc.o, b, s, d, t0, t1), merged);
        }
        nisa::dma_copy(acc.neg_max[s![b, .., g0..g1]], nm_new);
        nisa::dma_copy(acc.sum[s![b, .., g0..g1]], sum_new);
    }

    /// Query groups `[t0, t1)` of batch `b` of an `[.., S, d]` output as a
    /// `[P_MAX, t1 - t0, d]` view: row `Q_GRP_SZ t + p` of the batch at `[p, t - t0, :]`.
    #[nki_helper]
    fn group_rows(o: Hbm, b: i64, s: i64, d: i64, t0: i64, t1: i64) -> Hbm {
        o.ap([[d, P_MAX], [Q_GRP_SZ * d, t1 - t0], [1, d]], offset = (b * s + Q_GRP_SZ * t0) * d)
    }

    /// The library's `_write_back_impl` for the ring: the normalised output `O / S`
    /// of query groups `[g0, g1)` of batch `b` and, when training, the log-sum-exp
    /// `-n + ln S`. Rows that never saw a key keep the sentinel there: without
    /// segment ids none exists; with them the row's output is 0 and its LSE `-inf`.
    #[nki_helper]
    fn write_back_impl(cfg: RingFwdAttnConfig, io: RingFwdTensors, acc: RunningStats, b: i64, g0: i64, g1: i64) {
        let (groups, s, d, lse_dtype) = (g1 - g0, cfg.seqlen, cfg.d, cfg.lse_dtype);
        let sums: Sbuf = load_stats(acc.sum, b, g0, g1);
        let recip = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        nisa::reciprocal(recip, sums);
        // With segment ids a row may see no key at all (negated max still the
        // sentinel): 0 there, 1 elsewhere, so its output is 0 and its LSE -inf.
        let seen = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
        if cfg.ring.segmented {
            let nm: Sbuf = load_stats(acc.neg_max, b, g0, g1);
            nisa::tensor_scalar(seen, nm, nl::less, SEEN_THRESHOLD);
            nisa::tensor_tensor(recip, recip, seen, nl::multiply);
        }
        for t0 in (g0..g1).step_by(MERGE_GRP_TILES) {
            let t1 = (t0 + MERGE_GRP_TILES).min(g1);
            let tile = nl::ndarray([P_MAX, t1 - t0, d], nl::bfloat16, buffer = nl::sbuf);
            nisa::dma_copy(tile, group_rows(acc.o, b, s, d, t0, t1));
            nisa::tensor_tensor(tile, tile, recip[s![.., t0 - g0..t1 - g0]].expand_dim(2).broadcast(2, d), nl::multiply);
            nisa::dma_copy(group_rows(io.o, b, s, d, t0, t1), tile);
        }
        if let Some(l) = io.lse {
            let nm: Sbuf = load_stats(acc.neg_max, b, g0, g1);
            let out = nl::ndarray([P_MAX, groups], lse_dtype, buffer = nl::sbuf);
            nisa::tensor_scalar(out, nm, nl::multiply, -1.0);
            let log_sum = nl::ndarray([P_MAX, groups], lse_dtype, buffer = nl::sbuf);
            nisa::activation(log_sum, nl::log, sums);
            nisa::tensor_tensor(out, out, log_sum, nl::add);
            nisa::scalar_tensor_tensor(out, out, nl::greater, -SEEN_THRESHOLD, nl::multiply, out);
            if cfg.ring.segmented {
                let none = nl::ndarray([P_MAX, groups], lse_dtype, buffer = nl::sbuf);
                nisa::activation(none, nl::log, seen);
                nisa::tensor_tensor(out, out, none, nl::add);
            }
            nisa::dma_copy(l[s![b, .., g0..g1]], out);
        }
    }

    /// How many batch items this LNC program merges and normalises: its whole
    /// batches, and its groups of an odd last batch (`attention_cte` splits that
    /// one between the programs in CP and non-causal mode).
    #[nki_helper]
    fn batch_items(cfg: RingFwdAttnConfig) -> i64 {
        let has_remainder = cfg.bs % cfg.shards != 0;
        let items = cfg.per_shard + if has_remainder && cfg.rem_g1 > cfg.rem_g0 { 1 } else { 0 };
        items
    }

    /// Batch item `item` of this LNC program: `(batch, first group, end group)`.
    #[nki_helper]
    fn batch_item(cfg: RingFwdAttnConfig, item: i64) -> (i64, i64, i64) {
        let whole = item < cfg.per_shard;
        let b = if whole { cfg.shard * cfg.per_shard + item } else { cfg.bs - 1 };
        let g0 = if whole { 0 } else { cfg.rem_g0 };
        let g1 = if whole { cfg.n_grp } else { cfg.rem_g1 };
        (b, g0, g1)
    }

    /// The ring's masking state before step 0: a zeroed cp_offset, the queries'
    /// global positions, the zigzag queries' second half, and step 0's key bounds.
    #[nki_helper]
    fn setup_ring_impl(cfg: RingFwdAttnConfig, io: RingFwdTensors) -> RingFwdState {
        let (bs, s) = (cfg.bs, cfg.seqlen);
        let cp_offset = if cfg.cte_causal { Some(nl::ndarray([1, 1], nl::float32, buffer = nl::shared_hbm)) } else { None };
        if let Some(cpo) = cp_offset {
            let zero = nl::ndarray([1, 1], nl::float32, buffer = nl::sbuf);
            nisa::memset(zero, 0.0);
            nisa::dma_copy(cpo, zero);
        }
        let (home_pos, own_pos): (Sbuf, Sbuf) = ring_positions_at(io.ring.positions, cfg.ring.replica_groups, 0);
        let st = RingFwdState {
            q_pos: row_positions(home_pos, cfg.ring, s),
            own_pos,
            q_second: if cfg.zigzag_fast { seq_half(io.q, cfg.tp_q, 1, None) } else { io.q },
            cp_offset,
            bound_min: if cfg.ring.bounded { Some(nl::ndarray([bs, s, 1], nl::float32, buffer = nl::private_hbm)) } else { None },
            bound_max: if cfg.ring.bounded { Some(nl::ndarray([bs, s, 1], nl::float32, buffer = nl::private_hbm)) } else { None },
        };
        // A rank's zigzag chunks are in global order, so on its own block the causal
        // mask is the local one: attention_cte's static causal mask skips the tiles
        // above the diagonal (without a window or chunks).
        if !cfg.local_causal {
            store_bounds(cfg, st, own_pos);
        }
        st
    }

    /// Step 0: the rank's own keys, under the local causal mask on a zigzag rank,
    /// else the ring's masks; the sinks enter here only.
    #[nki_helper]
    fn own_step_impl(cfg: RingFwdAttnConfig, io: RingFwdTensors, st: RingFwdState) -> RunningStats {
        let own_bias: Option<Hbm> = step_bias(cfg, io, st.own_pos);
        let ring: StepMasks = ring_masks(cfg, io, st, io.sink, io.ring.kv_segment_ids, own_bias);
        let local = cfg.local_causal;
        let m = StepMasks {
            scale: ring.scale,
            causal: ring.causal || local,
            cp_offset: ring.cp_offset,
            cp_deg: ring.cp_deg,
            striped: ring.striped,
            sink: ring.sink,
            bound_min: if local { None } else { ring.bound_min },
            bound_max: if local { None } else { ring.bound_max },
            q_segment_ids: ring.q_segment_ids,
            kv_segment_ids: ring.kv_segment_ids,
            bias: ring.bias,
        };
        let acc: RunningStats = step_attention(cfg, io.q, io.k, io.v, m);
        acc
    }

    /// Copies this program's share of the KV batches (and program 0 the key
    /// segment ids) into the send buffers, then sends them to the ring successor.
    #[nki_helper]
    fn start_kv_ring(cfg: RingFwdAttnConfig, io: RingFwdTensors, send: KvBlock, recv: KvBlock) {
        let (bs_kv, shard, shards) = (cfg.bs_kv, cfg.shard, cfg.shards);
        let kv_per_shard = bs_kv / shards;
        let kv_first = shard * kv_per_shard;
        for bi in kv_first..kv_first + kv_per_shard {
            nisa::dma_copy(send.k[s![bi, .., ..]], io.k[s![bi, .., ..]]);
            nisa::dma_copy(send.v[s![bi, .., ..]], io.v[s![bi, .., ..]]);
        }
        if bs_kv % shards != 0 && shard == 0 {
            nisa::dma_copy(send.k[s![bs_kv - 1, .., ..]], io.k[s![bs_kv - 1, .., ..]]);
            nisa::dma_copy(send.v[s![bs_kv - 1, .., ..]], io.v[s![bs_kv - 1, .., ..]]);
        }
        let (kv_ids, send_ids) = (io.ring.kv_segment_ids, send.ids);
        if let Some(ks) = kv_ids {
            if let Some(ids) = send_ids {
                if shard == 0 {
                    nisa::dma_copy(ids, ks);
                }
            }
        }
        if cfg.last >= 1 {
            if shards > 1 {
                // Both programs wrote the send buffers.
                nisa::core_barrier(send.k, [0, 1]);
                nisa::core_barrier(send.v, [0, 1]);
                if let Some(ids) = send_ids {
                    nisa::core_barrier(ids, [0, 1]);
                }
            }
            pass_on(send, recv, cfg.ring.replica_groups);
        }
    }

    /// Writes the causal steps' cp_offset for ring step `step` to HBM:
    /// `(mine - theirs)·S` (contiguous) or `-[mine < theirs]` (striped).
    #[nki_helper]
    fn write_cp_offset(cfg: RingFwdAttnConfig, io: RingFwdTensors, st: RingFwdState, step: i64) {
        if let Some(cpo) = st.cp_offset {
            let (my_pos, their_pos): (Sbuf, Sbuf) = ring_positions_at(io.ring.positions, cfg.ring.replica_groups, step);
            let off = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
            if cfg.ring.striped {
                nisa::tensor_tensor(off, my_pos, their_pos, nl::less);
                nisa::tensor_scalar(off, off, nl::multiply, -1.0);
            } else {
                nisa::tensor_tensor(off, my_pos, their_pos, nl::subtract);
                nisa::tensor_scalar(off, off, nl::multiply, cfg.seqlen as f64);
            }
            nisa::dma_copy(cpo, off[s![0..1, 0..1]]);
        }
    }

    /// The selector of a zigzag ring step (see [`zigzag_step`]): int32 `[1, 1]`,
    /// 1 when the block arriving at `step` sits past this rank's in the sequence.
    #[nki_helper]
    fn arrival_is_later(cfg: RingFwdAttnConfig, io: RingFwdTensors, step: i64) -> Sbuf {
        let (here, there): (Sbuf, Sbuf) = ring_positions_at(io.ring.positions, cfg.ring.replica_groups, step);
        let later = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(later, there, here, nl::greater);
        let sel = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::tensor_copy(sel, later[s![0..1, 0..1]]);
        sel
    }

    /// Ring step `step >= 1`: the block that `arrived` against the local queries
    /// (when some rank needs it), the next transfer from `arrived` to `free` issued
    /// before the merge into `acc`.
    #[nki_helper]
    fn ring_step_impl(
        cfg: RingFwdAttnConfig,
        io: RingFwdTensors,
        st: RingFwdState,
        arrived: KvBlock,
        free: KvBlock,
        acc: RunningStats,
        step: i64,
    ) {
        // A step no rank needs computes nothing (its block still travels on when a later one is needed).
        let needed: bool = !cfg.ring.bounded || step_needed(step, cfg.ring, cfg.seqlen);
        if cfg.zigzag_fast {
            if step == 1 {
                // Whole batches merge from here on, whichever program's attention_cte wrote them.
                both_programs(acc, cfg.shards);
            }
            let sel: Sbuf = arrival_is_later(cfg, io, step);
            zigzag_step(cfg, io, st, arrived, acc, sel);
            // The next block goes out after the zigzag step.
            if step < cfg.last {
                pass_on(arrived, free, cfg.ring.replica_groups);
            }
        }
        write_cp_offset(cfg, io, st, step);
        if needed && !cfg.zigzag_fast {
            let (_here, k_pos): (Sbuf, Sbuf) = ring_positions_at(io.ring.positions, cfg.ring.replica_groups, step);
            let visiting_bias: Option<Hbm> = step_bias(cfg, io, k_pos);
            store_bounds(cfg, st, k_pos);
            let m: StepMasks = ring_masks(cfg, io, st, None, arrived.ids, visiting_bias);
            let cur: RunningStats = step_attention(cfg, io.q, arrived.k, arrived.v, m);
            // The next transfer goes out before this step's merge.
            if step < cfg.last {
                pass_on(arrived, free, cfg.ring.replica_groups);
            }
            for item in 0..batch_items(cfg) {
                let (b, g0, g1): (i64, i64, i64) = batch_item(cfg, item);
                merge_impl(acc, cur, b, g0, g1);
            }
        } else if step < cfg.last && !cfg.zigzag_fast {
            pass_on(arrived, free, cfg.ring.replica_groups);
        }
    }

    /// One side of the KV ring buffers, shaped like the own keys and values.
    #[nki_helper]
    fn allocate_kv_block(cfg: RingFwdAttnConfig, io: RingFwdTensors, batch: i64) -> KvBlock {
        let s = cfg.seqlen;
        KvBlock {
            k: nl::ndarray(io.k.shape(), io.k.dtype(), buffer = nl::shared_hbm),
            v: nl::ndarray(io.v.shape(), io.v.dtype(), buffer = nl::shared_hbm),
            ids: if cfg.ring.segmented { Some(nl::ndarray([batch, s], nl::int32, buffer = nl::shared_hbm)) } else { None },
        }
    }

    /// The shapes of `q`, `k` and `v`, checked: `(b, q_h, k_h, d, seqlen)`.
    #[nki_helper]
    fn check_shapes(q: Hbm, k: Hbm, v: Hbm, tp_q: bool, tp_k: bool) -> (i64, i64, i64, i64, i64) {
        assert!(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, "q, k and v must be 4-d, [b, h, d, seqlen] or [b, h, seqlen, d]");
        let q_shape = q.shape();
        let [b, q_h, d, s] = if tp_q { [q_shape[0], q_shape[1], q_shape[3], q_shape[2]] } else { q_shape };
        let k_shape = k.shape();
        let k_h = k_shape[1];
        assert!(k_h >= 1 && q_h % k_h == 0, crate::ring_rules::KV_HEADS);
        assert!(1 <= d && d <= MAX_HEAD_DIM, HEAD_DIM);
        assert!(s >= Q_GRP_SZ && s % Q_GRP_SZ == 0, crate::ring_rules::SEQLEN_MULTIPLE);
        // The library leaves these to attention_cte's asserts, or to nothing.
        let want_k = if tp_k { [b, k_h, s, d] } else { [b, k_h, d, s] };
        assert!(
            k_shape[0] == b && k_shape[2] == want_k[2] && k_shape[3] == want_k[3],
            "k must be {want_k} to match q's batch, seqlen and head dim, got {k_shape}"
        );
        let v_shape = v.shape();
        assert!(
            v_shape[0] == b && v_shape[1] == k_h && v_shape[2] == s && v_shape[3] == d,
            "v must be [{b}, {k_h}, {s}, {d}] to match q and k, got {v_shape}"
        );
        (b, q_h, k_h, d, s)
    }

    /// The ranks of the ring.
    #[nki_params]
    pub struct RingFwdWorkers {
        /// The ring's ranks (all of the launch's when `None`).
        pub replica_groups: Option<Groups>,
        /// The ranks in the ring.
        #[default(1)]
        #[range(>= 1)]
        pub num_workers: i64,
    }

    /// What the pass returns and the inputs' layouts.
    #[nki_params]
    pub struct RingFwdOutputs {
        /// Return each row's log-sum-exp too (for the backward pass).
        #[default(false)]
        pub training: bool,
        /// The log-sum-exp's dtype.
        #[default(nl::float32)]
        pub lse_dtype: Dtype,
        /// `q` is `[b, h, S, d]` (else `[b, h, d, S]`).
        #[default(false)]
        pub tp_q: bool,
        /// `k` is `[b, h_kv, S, d]` (else `[b, h_kv, d, S]`).
        #[default(false)]
        pub tp_k: bool,
    }

    /// Ring attention forward, a drop-in for the NKI library's
    /// `ring_attention_spmd_fwd` (2.30): each of `num_workers` ranks holds `seqlen`
    /// tokens of the sequence (contiguous blocks, or every `num_workers`-th token with
    /// `striped_input`); K and V travel around the ring so every rank attends its
    /// queries to the whole sequence.
    ///
    /// Layouts per rank: `q` is `[b, h, d, seqlen]` and `k` `[b, h_kv, d, seqlen]`
    /// (`[.., seqlen, d]` with `tp_q` / `tp_k`), `v` is `[b, h_kv, seqlen, d]`, with
    /// `h` a multiple of `h_kv` (GQA; the library's kernel needs `h_kv = h`). Returns
    /// the output `[b, h, seqlen, d]` and, when `training`, the log-sum-exp of the
    /// scaled scores `[b, h, 128, seqlen / 128]` (row `128 g + p` at `[.., p, g]`).
    /// With the causal mask the kernel ignores `softmax_scale`: `q` must be
    /// pre-scaled. Keyword arguments past the library's (default: off): `sinks`,
    /// float32 `[h]`, one logit per query head in every row's softmax denominator
    /// (not scaled; included in the log-sum-exp); `zigzag_input` (rank `r` holds
    /// chunks `r` and `2W-1-r` of `seqlen / 2` tokens; needs the causal mask);
    /// `window_left` / `window_right` (key `j` visible to query `i` only if
    /// `i - L <= j <= i + R`); `chunk_size` (only if `i / C == j / C`); `soft_cap`
    /// (logits `C·tanh(scale·q·k / C)`); `q_segment_ids` / `kv_segment_ids`, int32
    /// `[b, seqlen]` (both or neither; only keys with the query's id are visible,
    /// ids below 2^24 in magnitude; the key ids travel with K and V). A row that
    /// sees no key and has no sink outputs zeros and LSE `-inf`. `bias`, float32
    /// `[b, h, seqlen, num_workers·seqlen]`: this rank's query rows against every
    /// key at its global position, added to the logits after the soft cap (each
    /// step reads the columns of the visiting keys).
    ///
    /// The kernel checks its inputs, gathers them in [`RingFwdAttnConfig`] and
    /// [`RingFwdTensors`], sets up the ring ([`setup_ring_impl`]), runs step 0
    /// ([`own_step_impl`]) and every later step ([`ring_step_impl`]), and writes the
    /// normalised output ([`write_back_impl`]).
    #[nki_kernel]
    pub fn ring_attention_spmd_fwd(
        #[dtypes(float32, bfloat16, float16)] q: Hbm,
        #[dtypes(float32, bfloat16, float16)] k: Hbm,
        #[dtypes(float32, bfloat16, float16)] v: Hbm,
        #[spread] _: RingFwdWorkers,
        softmax_scale: Option<f64>,
        #[default(false)] use_causal_mask: bool,
        #[default(false)] striped_input: bool,
        #[spread] _: RingFwdOutputs,
        #[dtypes(float32)] sinks: Option<Hbm>,
        #[default(false)] zigzag_input: bool,
        #[spread] _: RingWindow,
        #[spread] _: ScoreFeatures,
    ) -> Outputs {
        assert!(nisa::get_nc_version() > nisa::nc_version::gen2, NEEDS_TRN2);
        let (b, q_h, k_h, d, s): (i64, i64, i64, i64, i64) = check_shapes(q, k, v, tp_q, tp_k);
        let ring: RingAttnFeatures = ring_features(
            replica_groups,
            num_workers,
            use_causal_mask,
            striped_input,
            zigzag_input,
            window_left,
            window_right,
            chunk_size,
            soft_cap,
            q_segment_ids.is_some(),
        );
        assert!(!use_causal_mask || num_workers <= MAX_CAUSAL_WORKERS, TOO_MANY_CAUSAL_WORKERS);
        check_feature_inputs(sinks, q_segment_ids, kv_segment_ids, bias, b, q_h, s, num_workers);
        let bounded = ring.bounded;

        let (bs, bs_kv, n_grp) = (b * q_h, b * k_h, s / Q_GRP_SZ);
        let q3 = if tp_q { q.reshape([bs, s, d]) } else { q.reshape([bs, d, s]) };
        let sink: Option<Hbm> = sink_rows(sinks, b, q_h);
        let scale: f64 = softmax_scale_of(softmax_scale, d);
        // LNC2: each program copies, merges and normalises the batches attention_cte gives it;
        // attention_cte splits an odd last batch half and half in CP and non-causal mode.
        let grid = nl::program_ndim() == 1;
        let shard = if grid { nl::program_id(0) } else { 0 };
        let shards = if grid { nl::num_programs(0) } else { 1 };
        let (rem_g0, rem_g1): (i64, i64) = remainder_groups(shard, s, n_grp, 0.5);
        // On its own block a zigzag rank's causal mask is the local one; its other
        // steps split into two unmasked half-size calls (halves of Q_GRP_SZ-row
        // groups; segment ids mask every step, so they take the bounds path).
        let local_causal = zigzag_input && ring.window_left < 0 && ring.chunk == 0;
        let cfg = RingFwdAttnConfig {
            bs,
            bs_kv,
            seqlen: s,
            d,
            n_grp,
            ring,
            tp_q,
            tp_k,
            // attention_cte takes scale 1.0 in CP mode: causal callers pre-scale q.
            attn_scale: if use_causal_mask || bounded { 1.0 } else { scale },
            cte_causal: use_causal_mask && !bounded,
            local_causal,
            zigzag_fast: local_causal && s % (2 * Q_GRP_SZ) == 0 && q_segment_ids.is_none() && bias.is_none(),
            // The ring turns only as far as some rank needs keys.
            last: if bounded { last_needed_step(ring, s) } else { num_workers - 1 },
            lse_dtype,
            shard,
            shards,
            per_shard: bs / shards,
            rem_g0,
            rem_g1,
        };
        let io = RingFwdTensors {
            q: if bounded && !use_causal_mask { scaled_copy(q3, scale) } else { q3 },
            k: if tp_k { k.reshape([bs_kv, s, d]) } else { k.reshape([bs_kv, d, s]) },
            v: v.reshape([bs_kv, s, d]),
            o: nl::ndarray([bs, s, d], q.dtype(), buffer = nl::shared_hbm),
            lse: if training { Some(nl::ndarray([bs, P_MAX, n_grp], lse_dtype, buffer = nl::shared_hbm)) } else { None },
            sink,
            ring: ring_tensors(ring, q_segment_ids, kv_segment_ids, bias),
        };
        let send: KvBlock = allocate_kv_block(cfg, io, b);
        let recv: KvBlock = allocate_kv_block(cfg, io, b);

        let st: RingFwdState = setup_ring_impl(cfg, io);
        let acc: RunningStats = own_step_impl(cfg, io, st);
        start_kv_ring(cfg, io, send, recv);
        for step in nl::sequential_range(1, cfg.last + 1) {
            // Odd steps find the keys in the receive buffers, even steps in the send buffers.
            if step % 2 == 1 {
                ring_step_impl(cfg, io, st, recv, send, acc, step);
            } else {
                ring_step_impl(cfg, io, st, send, recv, acc, step);
            }
        }
        if cfg.zigzag_fast && cfg.last >= 1 {
            both_programs(acc, shards);
        }
        for item in 0..batch_items(cfg) {
            let (bi, g0, g1): (i64, i64, i64) = batch_item(cfg, item);
            write_back_impl(cfg, io, acc, bi, g0, g1);
        }
        let o4 = io.o.reshape([b, q_h, s, d]);
        if let Some(l) = io.lse {
            return Outputs(o4, l.reshape([b, q_h, P_MAX, n_grp]));
        }
        Outputs(o4)
    }
}
