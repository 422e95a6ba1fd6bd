//! What both ring kernels take alike, declared once: the ring and its masks as
//! one bundle ([`RingAttnFeatures`], which each pass's configuration embeds as
//! its `ring` field), built and checked by [`ring_features`] from the keyword
//! arguments both kernels share; the checks of the optional feature inputs; and
//! the ring's tensors ([`RingTensors`]) and plumbing both passes use (ring
//! positions, the bias columns of a ring position, the optional tensors that
//! travel with a block).

use nki::prelude::*;

pub use ring::*;

/// The shared ring bundle, its checks and the ring's plumbing.
#[nki_module]
pub mod ring {
    use crate::cte::attention_cte::scalar_column;
    use nki::prelude::*;

    /// SBUF and PSUM partitions: a ring position column, and one column of
    /// per-row statistics, spans them.
    pub const P_MAX: i64 = nl::tile_size::pmax;

    /// The window masks both ring passes take, in their signatures' order.
    #[nki_params]
    pub struct RingWindow {
        /// Keys at most this far before a query are seen.
        #[range(>= 0)]
        pub window_left: Option<i64>,
        /// Keys at most this far after a query are seen.
        #[range(>= 0)]
        pub window_right: Option<i64>,
        /// Chunked attention: a query sees the keys of its chunk only.
        #[range(>= 1)]
        pub chunk_size: Option<i64>,
    }

    /// The ring and its masks, as both passes hold them (the kernel-side
    /// counterpart of the typed API's `RingFeatures`).
    #[nki_object]
    pub struct RingAttnFeatures {
        /// Ranks in each ring.
        pub num_workers: i64,
        /// The rings (empty: one ring of every rank).
        pub replica_groups: Groups,
        /// Causal mask over global positions.
        pub causal: bool,
        /// Striped layout.
        pub striped: bool,
        /// Zigzag layout.
        pub zigzag: bool,
        /// Windows, chunks or zigzag blocks: masks through per-row key bounds.
        pub bounded: bool,
        /// Segment ids are given.
        pub segmented: bool,
        /// Sliding window left size (-1: unbounded).
        pub window_left: i64,
        /// Sliding window right size (-1: unbounded).
        pub window_right: i64,
        /// Chunk size (0: none).
        pub chunk: i64,
        /// Logit soft cap.
        pub soft_cap: Option<f64>,
    }

    /// The ring's HBM tensors, as both passes hold them.
    #[nki_object]
    pub struct RingTensors {
        /// Query segment ids `[b, S]`.
        pub q_segment_ids: Option<Tensor>,
        /// This rank's key segment ids `[b, S]`.
        pub kv_segment_ids: Option<Tensor>,
        /// Bias `[b, h, S, W·S]`: this rank's query rows against every key.
        pub bias: Option<Tensor>,
        /// Ring position of every rank, `[1, rings·W]`.
        pub positions: Tensor,
    }

    /// The ring features of a call from the keyword arguments both kernels take
    /// (`striped` and `zigzag` are the layout flags, `segmented` whether segment
    /// ids are given), after the shared rules' asserts.
    #[nki_helper]
    pub fn ring_features(
        replica_groups: Option<Groups>,
        num_workers: i64,
        use_causal_mask: bool,
        striped: bool,
        zigzag: bool,
        window_left: Option<i64>,
        window_right: Option<i64>,
        chunk_size: Option<i64>,
        soft_cap: Option<f64>,
        segmented: bool,
    ) -> RingAttnFeatures {
        assert!(!striped || use_causal_mask, crate::ring_rules::STRIPED_NEEDS_CAUSAL);
        assert!(!zigzag || use_causal_mask, crate::ring_rules::ZIGZAG_NEEDS_CAUSAL);
        assert!(!(zigzag && striped), crate::ring_rules::ONE_LAYOUT);
        let groups = replica_groups.unwrap_or([]);
        for gi in 0..groups.len() {
            let size = groups[gi].len();
            assert!(size == num_workers, crate::ring_rules::GROUP_SIZE);
        }
        let left = window_left.unwrap_or(-1);
        let right = window_right.unwrap_or(-1);
        let chunk = chunk_size.unwrap_or(0);
        RingAttnFeatures {
            num_workers,
            replica_groups: groups,
            causal: use_causal_mask,
            striped,
            zigzag,
            // Windows, chunks and zigzag blocks mask through per-row key bounds.
            bounded: zigzag || left >= 0 || right >= 0 || chunk > 0,
            segmented,
            window_left: left,
            window_right: right,
            chunk,
            soft_cap,
        }
    }

    /// The softmax scale of head dim `d`: the given one, else `1/sqrt(d)`; a finite
    /// float32 value.
    #[nki_helper]
    pub fn softmax_scale_of(softmax_scale: Option<f64>, d: i64) -> f64 {
        let scale = softmax_scale.unwrap_or(1.0 / (d as f64).powf(0.5));
        assert!(f32::MIN <= scale && scale <= f32::MAX, crate::ring_rules::SCALE_NOT_FINITE);
        scale
    }

    /// Checks `sinks` (one float32 logit per query head), the segment ids (int32
    /// `[b, s]`, both or neither) and `bias` (float32 `[b, heads, s, num_workers·s]`:
    /// this rank's query rows against every key) for `b` batches of `heads` query
    /// heads and `s` tokens per rank.
    #[nki_helper]
    pub fn check_feature_inputs(
        sinks: Option<Hbm>,
        q_segment_ids: Option<Hbm>,
        kv_segment_ids: Option<Hbm>,
        bias: Option<Hbm>,
        b: i64,
        heads: i64,
        s: i64,
        num_workers: i64,
    ) {
        if let Some(sk) = sinks {
            let sk_shape = sk.shape();
            assert!(sk.ndim() == 1 && sk_shape[0] == heads, "sinks must be [{heads}] (one logit per query head), got {sk_shape}");
            assert!(sk.dtype() == nl::float32, "sinks must be float32");
        }
        assert!(q_segment_ids.is_some() == kv_segment_ids.is_some(), "q_segment_ids and kv_segment_ids must both be set or both be None");
        if let Some(qs) = q_segment_ids {
            let qs_shape = qs.shape();
            assert!(qs.ndim() == 2 && qs_shape[0] == b && qs_shape[1] == s, "q_segment_ids must be [{b}, {s}], got {qs_shape}");
            assert!(qs.dtype() == nl::int32, "q_segment_ids must be int32");
        }
        if let Some(ks) = kv_segment_ids {
            let ks_shape = ks.shape();
            assert!(ks.ndim() == 2 && ks_shape[0] == b && ks_shape[1] == s, "kv_segment_ids must be [{b}, {s}], got {ks_shape}");
            assert!(ks.dtype() == nl::int32, "kv_segment_ids must be int32");
        }
        if let Some(bi) = bias {
            let bi_shape = bi.shape();
            let total = num_workers * s;
            assert!(
                bi.ndim() == 4 && bi_shape[0] == b && bi_shape[1] == heads && bi_shape[2] == s && bi_shape[3] == total,
                "bias must be [{b}, {heads}, {s}, {total}] (this rank's query rows, every key), got {bi_shape}"
            );
            assert!(bi.dtype() == nl::float32, "bias must be float32");
        }
    }

    /// The ring's tensors of a call: the mask inputs as given and the table of
    /// every rank's ring position (always filled: every step reads it, masks or not).
    #[nki_helper]
    pub fn ring_tensors(ring: RingAttnFeatures, q_segment_ids: Option<Hbm>, kv_segment_ids: Option<Hbm>, bias: Option<Hbm>) -> RingTensors {
        let groups = ring.replica_groups;
        let n_rings = if groups.len() == 0 { 1 } else { groups.len() };
        let positions = nl::ndarray([1, n_rings * ring.num_workers], nl::float32, buffer = nl::shared_hbm);
        fill_ring_positions(positions, groups, ring.num_workers);
        RingTensors { q_segment_ids, kv_segment_ids, bias, positions }
    }

    /// Fills `table[0, rank] = position of rank in its ring` for every rank of the
    /// replica groups (`[0, 1, ..., num_workers)` when there are none): collectives
    /// name ranks by id, causal masking needs their positions.
    #[nki_helper]
    fn fill_ring_positions(table: Hbm, groups: Groups, num_workers: i64) {
        let ranks = table.shape()[1];
        let positions = nl::ndarray([1, ranks], nl::float32, buffer = nl::sbuf);
        if groups.len() == 0 {
            nisa::iota(positions, [[1, ranks]]);
        } else {
            for gi in 0..groups.len() {
                let ring = groups[gi];
                for j in 0..num_workers {
                    let r = ring[j];
                    nisa::memset(positions[s![0..1, r..r + 1]], j as f64);
                }
            }
        }
        nisa::dma_copy(table, positions);
    }

    /// `(P_MAX, 1)` columns holding this rank's ring position and the position of the
    /// rank whose data it holds after `step` steps.
    #[nki_helper]
    pub fn ring_positions_at(positions: Hbm, groups: Groups, step: i64) -> (Sbuf, Sbuf) {
        let rg = ncc::ReplicaGroup(groups);
        let me = ncc::collective_permute_implicit_current_processing_rank_id(0, rg);
        let mine: Sbuf = scalar_column(positions.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = me, indirect_dim = 1));
        let them = ncc::collective_permute_implicit_current_processing_rank_id(step, rg);
        let theirs: Sbuf = scalar_column(positions.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = them, indirect_dim = 1));
        (mine, theirs)
    }

    /// The columns of `bias` (`[b, h, S, W·S]`, global key positions) of the keys of
    /// ring position `kpos` (a `(P_MAX, 1)` fp32 column), in their local order, for
    /// the `count` (batch, head) pairs from `first`, as `[count, S, S]` in this
    /// program's HBM: one block of `S` columns (contiguous), every `W`-th column
    /// from `kpos` (striped), or chunks `kpos` and `2W-1-kpos` of `S / 2` columns
    /// (zigzag), picked at run time by `scalar_offset`.
    #[nki_helper]
    pub fn bias_block(bias: Hbm, first: i64, count: i64, kpos: Sbuf, ring: RingAttnFeatures) -> Hbm {
        let [b, h, s, total] = bias.shape();
        let w = ring.num_workers;
        let bs = b * h;
        let out = nl::ndarray([count, s, s], nl::float32, buffer = nl::private_hbm);
        let at = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::tensor_copy(at, kpos[s![0..1, 0..1]]);
        if ring.zigzag {
            let half = s / 2;
            let mirror = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_scalar(mirror, kpos, nl::multiply, -1.0, op1 = nl::add, operand1 = (2 * w - 1) as f64);
            let at_mirror = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::tensor_copy(at_mirror, mirror[s![0..1, 0..1]]);
            let chunks = bias.reshape([bs, s, 2 * w, half]);
            for i in 0..count {
                let rows = (first + i) * s * total;
                nisa::dma_copy(
                    out[s![i, .., 0..half]],
                    chunks.ap([[total, s], [1, half]], offset = rows, scalar_offset = at, indirect_dim = 2),
                );
                nisa::dma_copy(
                    out[s![i, .., half..s]],
                    chunks.ap([[total, s], [1, half]], offset = rows, scalar_offset = at_mirror, indirect_dim = 2),
                );
            }
        } else if ring.striped {
            let cols = bias.reshape([bs, s, s, w]);
            for i in 0..count {
                let rows = (first + i) * s * total;
                nisa::dma_copy(out[s![i, .., ..]], cols.ap([[total, s], [w, s]], offset = rows, scalar_offset = at, indirect_dim = 3));
            }
        } else {
            let blocks = bias.reshape([bs, s, w, s]);
            for i in 0..count {
                let rows = (first + i) * s * total;
                nisa::dma_copy(out[s![i, .., ..]], blocks.ap([[total, s], [1, s]], offset = rows, scalar_offset = at, indirect_dim = 2));
            }
        }
        out
    }

    /// Sends `send` to the ring successor's `recv` when the block has it (the
    /// tensors that travel with some blocks only: segment ids, bias rows).
    #[nki_helper]
    pub fn pass_optional(send: Option<Tensor>, recv: Option<Tensor>, groups: Groups) {
        if let Some(sent) = send {
            if let Some(received) = recv {
                ncc::collective_permute_implicit([[sent]], [[received]], ncc::ReplicaGroup(groups));
            }
        }
    }
}
