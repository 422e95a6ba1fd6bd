//! `attention_bwd`: the gradients of flash attention, written in the DSL, a
//! drop-in for the NKI library's kernel of that name.
//!
//! Algorithm. The scores are recomputed rather than stored: with
//! `P = exp(scale·QKᵀ − LSE)` (the forward's log-sum-exp, sinks included) and
//! `D = rowsum(dY ∘ O)`,
//!
//! ```text
//! dV = Pᵀ·dY      dS = P ∘ (dY·Vᵀ − D)      dQ = scale·dS·K      dK = scale·dSᵀ·Q
//! dsink = −Σ_rows exp(sink − LSE)·D
//! ```
//!
//! (K and V gradients summed over the query heads of each KV head). Masked
//! scores (causal, sliding window, packed sequences) are the FLOAT32_MIN
//! sentinel, so their P is 0 and they pass no gradient.
//!
//! ```text
//! for each (batch, KV head) pair of this LNC program:          (flash_attn_bwd_item)
//!     -LSE and D of the group's query heads, sink grads        (compute_row_stats)
//!     for each section of K_SEQ_SECTION_LEN keys:              (flash_attn_bwd_section)
//!         mask bounds of the section's keys                    (section_bounds)
//!         K, V and zeroed dK, dV of the section into SBUF      (load_kv)
//!         for each query head of the KV head's group:
//!             for each group of Q_TILE_GROUP_SIZE query tiles:  (flash_attn_bwd_group)
//!                 Q, dY, their transposes, dQ so far           (load_q_dy)
//!                 for each key tile the group's tiles see:     (get_required_tiles_mask)
//!                     P, dS, dQ += scale·dS·K,                 (bwd_tile, the ring
//!                     dV += Pᵀ·dY, dK += scale·dSᵀ·Q            backward's per-block math)
//!                 dQ written out (reloaded by the next section)
//!         dK, dV of the section written out
//! ```
//!
//! Tiling, as the library's: Q_SEQ_TILE_SIZE query rows per tile in groups of
//! Q_TILE_GROUP_SIZE, K_SEQ_TILE_SIZE-key tiles (the last one of a section holding
//! the rest), head dims in equal tiles of at most D_HEAD_TILE_MAX, keys in
//! sections of K_SEQ_SECTION_LEN (halved per doubling of the head-dim tiles) so
//! that K, V, dK and dV of a section stay in SBUF; per-row statistics as
//! `[P_MAX, S / P_MAX]` (row `P_MAX g + p` at `[p, g]`). `(batch, KV head)`
//! pairs are split into contiguous blocks over the LNC programs.
//!
//! Masks. The causal mask of a single section is the static pattern; otherwise
//! (packed sequences, a sliding window, or causal over several sections) every
//! row gets a key range `[lower, upper)`: `bound_min` / `bound_max` (else the
//! whole sequence), clamped to `upper <= row + 1` when causal and
//! `lower >= row - sliding_window + 1` with a window, shifted to the section.
//!
//! Unlike the library, Q is not multiplied by the scale in the input dtype before
//! QKᵀ: the scale enters the exp and dK in fp32, so a mask needs a scale of at
//! least [`MIN_MASKED_SCALE`](crate::scale::MIN_MASKED_SCALE); and the products
//! `dY ∘ O` of `D` are fp32 (the library rounds them to the input dtype). Both
//! keep a bf16 call within one bf16 step of the library's results.

use nki::prelude::*;

pub use flash_bwd::*;

/// The kernel with its tile constants, its state bundles and its phase helpers.
#[nki_module]
pub mod flash_bwd {
    use crate::ring_bwd::ring_attention_bwd::{
        AttentionGradInputs, K_SEQ_TILE_SIZE, KeyTile, KvTiles, Q_SEQ_TILE_SIZE, Q_TILE_GROUP_SIZE, RingBwdAttnConfig, StepQueries,
        block_config, bwd_tile, check_grad_shapes, compute_rowsum, head_tiles, load_kv_tiles, load_neg_lse, load_q_dy, sink_grad,
        store_kv_grads,
    };
    use crate::ring_features::{P_MAX, RingAttnFeatures};
    use nki::prelude::*;

    /// Keys per section with one head-dim tile (`k_seq_section_len`); with `n`
    /// head-dim tiles a section holds this over the next power of two of `n`.
    pub const K_SEQ_SECTION_LEN: i64 = 8192;
    /// `BwdRule::WindowNeedsCausal`: the one message of the kernel's assert and the typed API.
    pub const WINDOW_NEEDS_CAUSAL: &str = "attention_bwd: sliding_window is supported with use_causal_mask only";
    /// `BwdRule::CausalSeqlens`.
    pub const CAUSAL_SEQLENS: &str = "attention_bwd: use_causal_mask needs equal query and key sequence lengths";
    /// `BwdRule::KvHeads`.
    pub const KV_HEADS: &str = "attention_bwd: the query heads must be a multiple of the key/value heads";
    /// `BwdRule::SeqlenTiles`.
    pub const SEQLEN_TILES: &str = "attention_bwd: the query and key sequence lengths must be positive multiples of 128";
    /// `BwdRule::HeadDimTiles`.
    pub const HEAD_DIM_TILES: &str =
        "attention_bwd: the head dim must split into equal tiles of at most 128 (e.g. 192 = 2 x 96; a prime above 128 cannot)";
    /// `BwdRule::MaskedScale`.
    pub const MASKED_SCALE: &str = "attention_bwd: with a mask (causal, sliding window, bound_min / bound_max) the softmax_scale must be at least 1e-30: masked scores are FLOAT32_MIN and exp(scale x score - lse) scales them too";
    /// `BwdRule::ScaleNotFinite`.
    pub const SCALE_NOT_FINITE: &str = "attention_bwd: softmax_scale must be a finite float32 value";
    /// Given both or neither (the library's assert).
    pub const BOUNDS_TOGETHER: &str = "attention_bwd: bound_min and bound_max must both be given (sequence packing) or both be None";

    /// The shapes and flags of one call (the library's `AttentionBwdConfig`).
    #[nki_object]
    pub struct AttentionBwdConfig {
        /// Query heads per KV head (GQA).
        pub nheads_per_kv_head: i64,
        /// Query sequence length.
        pub seqlen_q: i64,
        /// Key sequence length.
        pub seqlen_k: i64,
        /// Keys per section.
        pub k_seq_section_len: i64,
        /// Causal mask.
        pub causal: bool,
        /// Sliding window size (0: none).
        pub sliding_window: i64,
        /// Rows are masked by key ranges (packing, a window, or causal over sections).
        pub bounded: bool,
    }

    /// The kernel's HBM inputs.
    #[nki_object]
    pub struct AttentionBwdTensors {
        /// Q, K, V, O, dY and the log-sum-exp.
        pub fwd: AttentionGradInputs,
        /// Sink logits `[B, N]` or `[B, N, num_sinks]`.
        pub sinks_ref: Option<Tensor>,
        /// First key of each query's sequence `[Sq]` (fp32).
        pub bound_min: Option<Tensor>,
        /// One past the last key of each query's sequence `[Sq]` (fp32).
        pub bound_max: Option<Tensor>,
    }

    /// The gradients in HBM.
    #[nki_object]
    pub struct AttentionBwdGrads {
        /// dQ `[B, N, D, Sq]`.
        pub dq: Tensor,
        /// dK `[B, N_kv, D, Sk]`.
        pub dk: Tensor,
        /// dV `[B, N_kv, D, Sk]`.
        pub dv: Tensor,
        /// dsinks, flattened to `[1, B·N·num_sinks]`.
        pub dsinks: Option<Tensor>,
    }

    /// Keys per section with `dnt` head-dim tiles: K_SEQ_SECTION_LEN over the
    /// smallest power of two of at least `dnt` (the library's budget for K, V, dK, dV).
    #[nki_helper]
    fn section_len(dnt: i64) -> i64 {
        let mut pow2 = 1;
        for _ in 0..dnt {
            if pow2 < dnt {
                pow2 *= 2;
            }
        }
        K_SEQ_SECTION_LEN / pow2
    }

    /// The library's `get_required_tiles_mask` for query tiles `qg..qg + cg` and the
    /// `kts` keys from global key `k0`: `(first, end)`, the group's query tiles
    /// `first..end` that see some of the keys (none when `first >= end`). The
    /// causal mask hides the tile from the earlier query tiles, the window from the
    /// later ones.
    #[nki_helper]
    fn get_required_tiles_mask(cfg: AttentionBwdConfig, qg: i64, cg: i64, k0: i64, kts: i64) -> (i64, i64) {
        let mut first = 0;
        let mut end = cg;
        if cfg.causal {
            // Query tile g sees the tile when its last row, Q_SEQ_TILE_SIZE (g + 1) - 1, reaches k0.
            first = (k0 / Q_SEQ_TILE_SIZE - qg).max(0).min(cg);
            if cfg.sliding_window > 0 {
                // ... and its first row's window, from Q_SEQ_TILE_SIZE g - w + 1, reaches the tile's last key.
                end = ((k0 + kts + cfg.sliding_window - 2) / Q_SEQ_TILE_SIZE - qg + 1).max(0).min(cg);
            }
        }
        (first, end)
    }

    /// The key range `[lower, upper)` of every query row in the coordinates of the
    /// section from key `k_start`, `[P_MAX, Sq / P_MAX]` fp32 each (None without
    /// range masks): `bound_min` / `bound_max` or the whole sequence, clamped by
    /// the causal mask and the sliding window.
    #[nki_helper]
    fn section_bounds(cfg: AttentionBwdConfig, io: AttentionBwdTensors, k_start: i64) -> (Option<Sbuf>, Option<Sbuf>) {
        if !cfg.bounded {
            return (None, None);
        }
        let qnt = cfg.seqlen_q / Q_SEQ_TILE_SIZE;
        let lower = nl::ndarray([P_MAX, qnt], nl::float32, buffer = nl::sbuf);
        let upper = nl::ndarray([P_MAX, qnt], nl::float32, buffer = nl::sbuf);
        let (bmin, bmax) = (io.bound_min, io.bound_max);
        if let Some(lo) = bmin {
            nisa::dma_copy(lower, lo.ap([[1, P_MAX], [P_MAX, qnt]], offset = 0));
        } else {
            nisa::memset(lower, 0.0);
        }
        if let Some(hi) = bmax {
            nisa::dma_copy(upper, hi.ap([[1, P_MAX], [P_MAX, qnt]], offset = 0));
        } else {
            nisa::memset(upper, cfg.seqlen_k as f64);
        }
        let rows = nl::ndarray([P_MAX, qnt], nl::float32, buffer = nl::sbuf);
        nisa::iota(rows, [[P_MAX, qnt]], channel_multiplier = 1);
        let edge = nl::ndarray([P_MAX, qnt], nl::float32, buffer = nl::sbuf);
        if cfg.causal {
            nisa::tensor_scalar(edge, rows, nl::add, 1.0);
            nisa::tensor_tensor(upper, upper, edge, nl::minimum);
        }
        if cfg.sliding_window > 0 {
            nisa::tensor_scalar(edge, rows, nl::subtract, (cfg.sliding_window - 1) as f64);
            nisa::tensor_tensor(lower, lower, edge, nl::maximum);
        }
        nisa::tensor_scalar(lower, lower, nl::subtract, k_start as f64);
        nisa::tensor_scalar(upper, upper, nl::subtract, k_start as f64);
        (Some(lower), Some(upper))
    }

    /// The library's `load_kv`: K, V and zeroed dK, dV of the `width` keys from
    /// `k_start` of KV head `kvh` of batch `bid`.
    #[nki_helper]
    fn load_kv(blk: RingBwdAttnConfig, io: AttentionBwdTensors, bid: i64, kvh: i64, k_start: i64, width: i64) -> KvTiles {
        load_kv_tiles(blk, io.fwd.k_ref[s![bid, kvh, .., ..]], io.fwd.v_ref[s![bid, kvh, .., ..]], k_start, width, None, None)
    }

    /// Stages `-LSE` and `D` of query head `hid` of batch `bid` in `stats`
    /// (`[2, P_MAX, Sq / P_MAX]`) and, with sinks, writes the head's sink gradients.
    #[nki_helper]
    fn compute_row_stats(blk: RingBwdAttnConfig, io: AttentionBwdTensors, grads: AttentionBwdGrads, stats: Hbm, bid: i64, hid: i64) {
        let neg_lse: Sbuf = load_neg_lse(io.fwd.lse_ref[s![bid, hid, .., ..]], blk.mixed_dtype, false);
        let dos: Sbuf = compute_rowsum(blk, io.fwd.o_ref[s![bid, hid, .., ..]], io.fwd.dy_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(stats[s![0, .., ..]], neg_lse);
        nisa::dma_copy(stats[s![1, .., ..]], dos);
        let (sinks, dsinks) = (io.sinks_ref, grads.dsinks);
        if let Some(sk) = sinks {
            if let Some(ds) = dsinks {
                // Sink j of (bid, hid) and its gradient share one flat index.
                let n = io.fwd.q_ref.shape()[1];
                let ns = ds.shape()[1] / (io.fwd.q_ref.shape()[0] * n);
                for j in 0..ns {
                    sink_grad(sk, neg_lse, dos, ds, 0, (bid * n + hid) * ns + j);
                }
            }
        }
    }

    /// Query tiles `qg..qg + cg` of the queries in `st` against the section's keys
    /// in `kv` (from global key `k_start`): dQ continues from the previous
    /// sections' (written to `dq` in HBM, `[D, Sq]`), dK and dV accumulate in `kv`.
    #[nki_helper]
    fn flash_attn_bwd_group(
        cfg: AttentionBwdConfig,
        blk: RingBwdAttnConfig,
        kv: KvTiles,
        st: StepQueries,
        dq: Hbm,
        k_start: i64,
        qg: i64,
        cg: i64,
    ) {
        let (dts, dnt) = (blk.d_head_tile_size, blk.d_head_n_tiles);
        let (q0, q1) = (Q_SEQ_TILE_SIZE * qg, Q_SEQ_TILE_SIZE * (qg + cg));
        let grp = load_q_dy(blk, st, qg, cg);
        if k_start > 0 {
            for dt in 0..dnt {
                nisa::dma_copy(grp.dq[s![.., dt, ..]], dq[s![dt * dts..(dt + 1) * dts, q0..q1]]);
            }
        }
        let width = kv.k.shape()[2];
        for kt in 0..(width + K_SEQ_TILE_SIZE - 1) / K_SEQ_TILE_SIZE {
            let k0 = kt * K_SEQ_TILE_SIZE;
            let kts = (width - k0).min(K_SEQ_TILE_SIZE);
            let (first, end): (i64, i64) = get_required_tiles_mask(cfg, qg, cg, k_start + k0, kts);
            // Tiles past `end` (window) are computed too: their scores are all masked, so they add zeros.
            if first < end {
                bwd_tile(blk, kv, st, grp, KeyTile { k0, kts, first });
            }
        }
        for dt in 0..dnt {
            nisa::dma_copy(dq[s![dt * dts..(dt + 1) * dts, q0..q1]], grp.dq[s![.., dt, ..]]);
        }
    }

    /// One section of `len` keys from `k_start` for KV head `kvh` of batch `bid`:
    /// every query head of its group against the section's keys (their `-LSE` and
    /// `D` staged in `stats`, `[group, 2, P_MAX, Sq / P_MAX]`), then the section's
    /// dK and dV written out.
    #[nki_helper]
    fn flash_attn_bwd_section(
        cfg: AttentionBwdConfig,
        blk: RingBwdAttnConfig,
        io: AttentionBwdTensors,
        grads: AttentionBwdGrads,
        stats: Hbm,
        bid: i64,
        kvh: i64,
        k_start: i64,
    ) {
        let width = (cfg.seqlen_k - k_start).min(cfg.k_seq_section_len);
        let (lower, upper): (Option<Sbuf>, Option<Sbuf>) = section_bounds(cfg, io, k_start);
        let kv: KvTiles = load_kv(blk, io, bid, kvh, k_start, width);
        let (group, qnt) = (cfg.nheads_per_kv_head, blk.q_n_tiles);
        for qh in 0..group {
            let hid = kvh * group + qh;
            let neg_lse = nl::ndarray([P_MAX, qnt], blk.mixed_dtype, buffer = nl::sbuf);
            let dos = nl::ndarray([P_MAX, qnt], blk.mixed_dtype, buffer = nl::sbuf);
            nisa::dma_copy(neg_lse, stats[s![qh, 0, .., ..]]);
            nisa::dma_copy(dos, stats[s![qh, 1, .., ..]]);
            let static_causal = cfg.causal && !cfg.bounded;
            let st = StepQueries {
                q: io.fwd.q_ref[s![bid, hid, .., ..]],
                dy: io.fwd.dy_ref[s![bid, hid, .., ..]],
                neg_lse,
                dos,
                q_ids: None,
                bias: None,
                lower,
                upper,
                causal: static_causal,
                skip: static_causal,
            };
            for qg in (0..qnt).step_by(Q_TILE_GROUP_SIZE) {
                let cg = (qnt - qg).min(Q_TILE_GROUP_SIZE);
                flash_attn_bwd_group(cfg, blk, kv, st, grads.dq[s![bid, hid, .., ..]], k_start, qg, cg);
            }
        }
        let k_end = k_start + width;
        store_kv_grads(blk, kv, grads.dk[s![bid, kvh, .., k_start..k_end]], grads.dv[s![bid, kvh, .., k_start..k_end]]);
    }

    /// Every gradient of KV head `kvh` of batch `bid`: the row statistics of its
    /// query heads staged before K and V take their SBUF, then section by section.
    #[nki_helper]
    fn flash_attn_bwd_item(
        cfg: AttentionBwdConfig,
        blk: RingBwdAttnConfig,
        io: AttentionBwdTensors,
        grads: AttentionBwdGrads,
        bid: i64,
        kvh: i64,
    ) {
        let group = cfg.nheads_per_kv_head;
        let stats = nl::ndarray([group, 2, P_MAX, blk.q_n_tiles], blk.mixed_dtype, buffer = nl::private_hbm);
        for qh in 0..group {
            compute_row_stats(blk, io, grads, stats[s![qh, .., .., ..]], bid, kvh * group + qh);
        }
        for k_start in (0..cfg.seqlen_k).step_by(cfg.k_seq_section_len) {
            flash_attn_bwd_section(cfg, blk, io, grads, stats, bid, kvh, k_start);
        }
    }

    /// dsinks like the sinks (None without them).
    #[nki_helper]
    fn allocate_dsinks(sinks_ref: Option<Hbm>) -> Option<Hbm> {
        if let Some(sr) = sinks_ref {
            return Some(nl::ndarray(sr.shape(), sr.dtype(), buffer = nl::shared_hbm));
        }
        None
    }

    /// `[bs, nheads]` or `[bs, nheads, num_sinks]` sinks (or their gradient) as
    /// `[1, bs·nheads·num_sinks]`: sink `j` of `(b, h)` at `(b·nheads + h)·num_sinks + j`.
    #[nki_helper]
    fn flat_sinks(sinks: Option<Hbm>) -> Option<Hbm> {
        if let Some(t) = sinks {
            let shape = t.shape();
            let per_head = if t.ndim() == 3 { shape[2] } else { 1 };
            return Some(t.reshape([1, shape[0] * shape[1] * per_head]));
        }
        None
    }

    /// The library's `validate_inputs`: shapes and dtypes of the inputs.
    #[nki_helper]
    fn validate_inputs(io: AttentionBwdTensors, use_causal_mask: bool, sliding_window: i64) {
        let q_shape = io.fwd.q_ref.shape();
        assert!(io.fwd.q_ref.ndim() == 4, "q_ref must be [bs, nheads, d_head, seqlen_q], got {q_shape}");
        let [b, n, _dh, sq] = q_shape;
        let n_kv = io.fwd.k_ref.shape()[1];
        assert!(n_kv >= 1 && n % n_kv == 0, KV_HEADS);
        check_grad_shapes(io.fwd, false);
        let sk = io.fwd.k_ref.shape()[3];
        assert!(sq >= Q_SEQ_TILE_SIZE && sq % Q_SEQ_TILE_SIZE == 0 && sk >= P_MAX && sk % P_MAX == 0, SEQLEN_TILES);
        assert!(!use_causal_mask || sq == sk, CAUSAL_SEQLENS);
        if let Some(sk_ref) = io.sinks_ref {
            let shape = sk_ref.shape();
            let ok = (sk_ref.ndim() == 2 || sk_ref.ndim() == 3) && shape[0] == b && shape[1] == n;
            assert!(ok, "sinks_ref must be [bs, nheads] or [bs, nheads, num_sinks] = [{b}, {n}, ..], got {shape}");
        }
        assert!(sliding_window <= 0 || use_causal_mask, WINDOW_NEEDS_CAUSAL);
        assert!(io.bound_min.is_some() == io.bound_max.is_some(), BOUNDS_TOGETHER);
        if let Some(lo) = io.bound_min {
            let lo_shape = lo.shape();
            assert!(lo.ndim() == 1 && lo_shape[0] == sq, "bound_min must be [seqlen_q] = [{sq}], got {lo_shape}");
        }
        if let Some(hi) = io.bound_max {
            let hi_shape = hi.shape();
            assert!(hi.ndim() == 1 && hi_shape[0] == sq, "bound_max must be [seqlen_q] = [{sq}], got {hi_shape}");
        }
    }

    /// Flash attention backward, a drop-in for the NKI library's `attention_bwd`:
    /// dQ, dK and dV (and, with sinks, dsinks) of `softmax(scale·QKᵀ)·V`.
    ///
    /// q_ref, o_ref and dy_ref are `[bs, nheads, d_head, seqlen_q]` (head-dim
    /// major), k_ref and v_ref `[bs, nheads_kv, d_head, seqlen_k]` (grouped-query
    /// and multi-query attention when `nheads_kv < nheads`), lse_ref the forward's
    /// log-sum-exp of the scaled scores `[bs, nheads, 128, seqlen_q / 128]` (row
    /// `128 g + p` at `[.., p, g]`, the sinks included). sinks_ref, `[bs, nheads]`
    /// or `[bs, nheads, num_sinks]`, are the forward's sink logits; bound_min and
    /// bound_max (fp32 `[seqlen_q]`, both or neither) pack sequences: query `i`
    /// sees keys `bound_min[i] <= j < bound_max[i]`. use_causal_mask needs
    /// `seqlen_q == seqlen_k`; sliding_window (None or 0: off) keeps keys
    /// `j > i - sliding_window` and needs the causal mask. softmax_scale (None or
    /// 0: `1/sqrt(d_head)`) is applied inside. With mixed_precision the
    /// accumulators, `-LSE` and `D` are fp32 (else the input dtype). Returns dq,
    /// dk, dv in the input dtype, and dsinks in the sinks' dtype and shape.
    ///
    /// The kernel checks its inputs, gathers them in [`AttentionBwdConfig`] and
    /// [`AttentionBwdTensors`], and runs [`flash_attn_bwd_item`] per
    /// (batch, KV head) pair of its LNC program.
    #[nki_kernel]
    pub fn attention_bwd(
        #[spread] fwd: AttentionGradInputs,
        #[dtypes(float32, bfloat16, float16)] sinks_ref: Option<Hbm>,
        #[dtypes(float32)] bound_min: Option<Hbm>,
        #[dtypes(float32)] bound_max: Option<Hbm>,
        #[default(false)] use_causal_mask: bool,
        #[default(false)] mixed_precision: bool,
        softmax_scale: Option<f64>,
        sliding_window: Option<i64>,
    ) -> Outputs {
        let io = AttentionBwdTensors { fwd, sinks_ref, bound_min, bound_max };
        let window_arg = sliding_window.unwrap_or(0);
        validate_inputs(io, use_causal_mask, window_arg);
        let [b, n, dh, sq] = q_ref.shape();
        let (k_shape, n_kv, sk, kdt) = (k_ref.shape(), k_ref.shape()[1], k_ref.shape()[3], q_ref.dtype());
        let (dts, dnt): (i64, i64) = head_tiles(dh);
        assert!(dh % dts == 0, HEAD_DIM_TILES);
        // The library's `softmax_scale or 1/sqrt(d)`: None and 0 both mean the default.
        let given = softmax_scale.unwrap_or(0.0);
        let scale = if given == 0.0 { 1.0 / (dh as f64).powf(0.5) } else { given };
        assert!(f32::MIN <= scale && scale <= f32::MAX, SCALE_NOT_FINITE);
        let packed = bound_min.is_some();
        let window = if window_arg > 0 { window_arg.min(sk) } else { 0 };
        assert!(!(use_causal_mask || packed) || scale >= 1e-30, MASKED_SCALE);
        let section: i64 = section_len(dnt);
        let cfg = AttentionBwdConfig {
            nheads_per_kv_head: n / n_kv,
            seqlen_q: sq,
            seqlen_k: sk,
            k_seq_section_len: section,
            causal: use_causal_mask,
            sliding_window: window,
            bounded: packed || window > 0 || (use_causal_mask && sk > section),
        };
        // The ring backward's per-block math on one rank: no ring, no extra features.
        let one_rank = RingAttnFeatures {
            num_workers: 1,
            replica_groups: [],
            causal: use_causal_mask,
            striped: false,
            zigzag: false,
            bounded: cfg.bounded,
            segmented: false,
            window_left: -1,
            window_right: -1,
            chunk: 0,
            soft_cap: None,
        };
        let blk: RingBwdAttnConfig = block_config(io.fwd, mixed_precision, one_rank, scale, 1, 0);
        let out_dq = nl::ndarray(q_ref.shape(), kdt, buffer = nl::shared_hbm);
        let out_dk = nl::ndarray(k_shape, kdt, buffer = nl::shared_hbm);
        let out_dv = nl::ndarray(k_shape, kdt, buffer = nl::shared_hbm);
        let out_dsinks: Option<Hbm> = allocate_dsinks(sinks_ref);
        let grads = AttentionBwdGrads { dq: out_dq, dk: out_dk, dv: out_dv, dsinks: flat_sinks(out_dsinks) };

        // Contiguous blocks of (batch, KV head) pairs per LNC program.
        let grid = nl::program_ndim() != 0;
        let shards = if grid { nl::num_programs(0) } else { 1 };
        let shard = if grid { nl::program_id(0) } else { 0 };
        let pairs = b * n_kv;
        let per_shard = (pairs + shards - 1) / shards;
        let start = shard * per_shard;
        let end = (start + per_shard).min(pairs);
        for item in start..end {
            flash_attn_bwd_item(cfg, blk, io, grads, item / n_kv, item % n_kv);
        }
        if let Some(ds) = out_dsinks {
            return Outputs(out_dq, out_dk, out_dv, ds);
        }
        Outputs(out_dq, out_dk, out_dv)
    }
}
