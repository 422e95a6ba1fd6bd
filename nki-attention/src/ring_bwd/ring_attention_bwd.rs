//! `ring_attention_spmd_bwd`: the gradients of ring attention, written in the DSL.
//!
//! Algorithm. K and V stay on their rank; each rank's Q, dY, log-sum-exp and
//! `D = rowsum(dY ∘ O)` travel around the ring. At every step a rank recomputes
//! `P = exp(scale·QKᵀ − LSE)` for the visiting queries against its keys, adds
//! `Pᵀ·dY` to dV and `scale·dSᵀ·Q` to dK (with `dS = P ∘ (dY·Vᵀ − D)`), and adds
//! `scale·dS·K` to the visiting queries' dQ, which travels one hop behind its Q:
//! a reducing permute sums it on the way, so after the last step every rank holds
//! the complete dQ of its own queries.
//!
//! ```text
//! for each (batch, KV head) pair of this LNC program:      (ring_bwd_item)
//!     -LSE and D of the group's query heads, sink grads    (stage_row_stats)
//!     K, V, zeroed dK, dV and the key ids into SBUF         (load_kv)
//!     for each query head of the KV head's group:          (ring_bwd_head)
//!         own Q, dY, LSE, D into the send buffers, permute (send_own_queries)
//!         for each ring step (step 0: the own queries):    (ring_bwd_step)
//!             mask bounds of the visiting queries          (step_bounds)
//!             for each group of Q_TILE_GROUP_SIZE query tiles:  (compute_step)
//!                 load Q, dY and their transposes          (load_q_dy)
//!                 for each key tile of K_SEQ_TILE_SIZE keys:    (bwd_tile)
//!                     scores, soft cap, bias, masks, P, dS (recompute_qk_softmax,
//!                                                           compute_softmax_backward_dx)
//!                     dQ += scale·dS·K                     (accumulate_dq)
//!                     dV += Pᵀ·dY, dK += scale·dSᵀ·Q       (accumulate_dk_dv)
//!             this step's dQ joins the travelling sum (reducing permute)
//!         the complete dQ of the own queries is written out
//!     dK, dV written out
//! ```
//!
//! Tiling, as the library's backward: Q_SEQ_TILE_SIZE query rows per tile in
//! groups of Q_TILE_GROUP_SIZE, K_SEQ_TILE_SIZE-key tiles (the last one holding
//! the rest of the rank's keys), head dims in equal tiles of at most
//! D_HEAD_TILE_MAX; per-row statistics as `[P_MAX, S / P_MAX]` (row `P_MAX g + p`
//! at `[p, g]`).
//!
//! Segment ids mask the scores of every tile like the other masks (the
//! FLOAT32_MIN sentinel where the ids differ); the queries' ids travel with Q,
//! the keys' stay. A row whose forward saw no key (LSE `-inf`) gets P = 0, so
//! no gradient.

use nki::prelude::*;

pub use ring_bwd::*;

/// The kernel with its tile constants, its state bundles and its phase helpers.
#[nki_module]
pub mod ring_bwd {
    use crate::cte::attention_cte::{ScoreFeatures, mask_segments, scalar_column};
    use crate::ring_features::{
        P_MAX, RingAttnFeatures, RingTensors, RingWindow, bias_block, check_feature_inputs, pass_optional, ring_features,
        ring_positions_at, ring_tensors, softmax_scale_of,
    };
    use crate::ring_masks::{key_bounds, row_positions, step_needed};
    use nki::prelude::*;

    /// Query rows per tile (the library's `q_seq_tile_size`).
    pub const Q_SEQ_TILE_SIZE: i64 = nl::tile_size::pmax;
    /// Query tiles processed together (`q_tile_group_size`).
    pub const Q_TILE_GROUP_SIZE: i64 = 4;
    /// Keys per tile (`k_seq_tile_size`, `min(512, S)`); the last tile holds the rest.
    pub const K_SEQ_TILE_SIZE: i64 = nl::tile_size::psum_fmax;
    /// Keys per PE transpose of K and dS (`k_seq_tile_size_backward`): the contracted partitions of dQ.
    pub const K_SEQ_TILE_SIZE_BACKWARD: i64 = nl::tile_size::pmax;
    /// The widest head-dim tile: head dims are split into equal tiles of at most this.
    pub const D_HEAD_TILE_MAX: i64 = nl::tile_size::pmax;
    /// `RingBwdRule::CausalScale`: the one message of the kernel's assert, the typed
    /// API's checks (compile time and run time) and the CLI (the rules both passes
    /// share have theirs in ring_rules).
    pub const CAUSAL_SCALE: &str = "ring_attention_spmd_bwd: with a mask (causal, window, chunks) the softmax_scale must be at least 1e-30: masked scores are FLOAT32_MIN and exp(scale x score - lse) scales them too, so a zero, negative or smaller scale unmasks them";
    /// `RingBwdRule::HeadDimTiles`, one message as above.
    pub const HEAD_DIM_TILES: &str =
        "ring_attention_spmd_bwd: the head dim must split into equal tiles of at most 128 (e.g. 192 = 2 x 96; a prime above 128 cannot)";

    /// The shapes and flags of one call (the library's `AttentionBwdConfig`, with the ring's).
    #[nki_object]
    pub struct RingBwdAttnConfig {
        /// The dtype of Q, K, V, O and dY.
        pub kernel_dtype: Dtype,
        /// The dtype of the accumulators, `-LSE` and `D` (fp32 with `mixed_precision`).
        pub mixed_dtype: Dtype,
        /// Query heads per KV head (GQA).
        pub nheads_per_kv_head: i64,
        /// Head dimension.
        pub d_head: i64,
        /// Tokens per rank.
        pub seqlen: i64,
        /// Head-dim tile size.
        pub d_head_tile_size: i64,
        /// Head-dim tiles.
        pub d_head_n_tiles: i64,
        /// Query tiles per rank.
        pub q_n_tiles: i64,
        /// LNC programs (the launch's LNC degree).
        pub lnc: i64,
        /// This program's slot in every ring buffer.
        pub lnc_id: i64,
        /// The ring and its masks (shared with the forward).
        pub ring: RingAttnFeatures,
        /// Softmax scale.
        pub scale: f64,
    }

    /// The forward's tensors and the output gradient, as every attention
    /// backward takes them (`Sq` the queries', `Sk` the keys' length).
    #[nki_object]
    pub struct AttentionGradInputs {
        /// Queries `[B, N, D, Sq]`.
        #[dtypes(float32, bfloat16, float16)]
        pub q_ref: Hbm,
        /// Keys `[B, N_kv, D, Sk]`.
        #[dtypes(float32, bfloat16, float16)]
        pub k_ref: Hbm,
        /// Values `[B, N_kv, D, Sk]`.
        #[dtypes(float32, bfloat16, float16)]
        pub v_ref: Hbm,
        /// The forward's output `[B, N, D, Sq]`.
        #[dtypes(float32, bfloat16, float16)]
        pub o_ref: Hbm,
        /// dL/dO `[B, N, D, Sq]`.
        #[dtypes(float32, bfloat16, float16)]
        pub dy_ref: Hbm,
        /// The forward's log-sum-exp `[B, N, P_MAX, Sq / P_MAX]`.
        #[dtypes(float32, bfloat16, float16)]
        pub lse_ref: Hbm,
    }

    /// The kernel's HBM inputs.
    #[nki_object]
    pub struct RingBwdTensors {
        /// Q, K, V, O, dY and the log-sum-exp (`Sq = Sk = S`, the rank's tokens).
        pub fwd: AttentionGradInputs,
        /// Sink logits `[N]`.
        pub sinks: Option<Tensor>,
        /// The segment ids, the bias and the ring positions (as the forward's).
        pub ring: RingTensors,
    }

    /// Where one (batch, KV head) pair writes its gradients.
    #[nki_object]
    pub struct RingBwdGrads {
        /// dQ `[B, N, D, S]`.
        pub dq: Tensor,
        /// dK `[B, N_kv, D, S]`.
        pub dk: Tensor,
        /// dV `[B, N_kv, D, S]`.
        pub dv: Tensor,
        /// Each (batch, query head)'s share of the sink gradient, `[B, N]`.
        pub dsink_part: Tensor,
    }

    /// One side (send or receive) of the ring buffers of the travelling queries,
    /// one slot per LNC program.
    #[nki_object]
    pub struct QueryBlock {
        /// Q `[lnc, D, S]`.
        pub q: Tensor,
        /// dY `[lnc, D, S]`.
        pub dy: Tensor,
        /// LSE `[lnc, P_MAX, S / P_MAX]`.
        pub lse: Tensor,
        /// D `[lnc, P_MAX, S / P_MAX]`.
        pub dos: Tensor,
        /// Query segment ids in fp32 `[lnc, P_MAX, S / P_MAX]`.
        pub ids: Option<Tensor>,
        /// Bias rows `[lnc, S, W·S]`.
        pub bias: Option<Tensor>,
    }

    /// The dQ ring: the partial sum arrives in one buffer and leaves from the other.
    #[nki_object]
    pub struct DqRing {
        /// Send buffer `[lnc, D, S]` fp32.
        pub send: Tensor,
        /// Receive buffer `[lnc, D, S]` fp32.
        pub recv: Tensor,
        /// This step's dQ of the visiting queries, `[lnc, D, S]` fp32.
        pub scratch: Tensor,
    }

    /// The local keys in SBUF with their gradient accumulators (the library's `load_kv`).
    #[nki_object]
    pub struct KvTiles {
        /// K as `[d_head_tile_size, d_head_n_tiles, S]`.
        pub k: Tensor,
        /// V as `[d_head_tile_size, d_head_n_tiles, S]`.
        pub v: Tensor,
        /// dK accumulator, like K.
        pub dk: Tensor,
        /// dV accumulator, like V.
        pub dv: Tensor,
        /// The keys' segment ids in fp32 on every partition, `[P_MAX, S]`.
        pub k_ids: Option<Tensor>,
        /// The local queries' segment ids, `[P_MAX, S / P_MAX]`.
        pub own_q_ids: Option<Tensor>,
    }

    /// The visiting queries of one ring step and how they are masked.
    #[nki_object]
    pub struct StepQueries {
        /// Q `[D, S]`.
        pub q: Tensor,
        /// dY `[D, S]`.
        pub dy: Tensor,
        /// `-LSE`, `[P_MAX, S / P_MAX]`.
        pub neg_lse: Tensor,
        /// `D`, `[P_MAX, S / P_MAX]`.
        pub dos: Tensor,
        /// Their segment ids, `[P_MAX, S / P_MAX]`.
        pub q_ids: Option<Tensor>,
        /// Their bias against the local keys, `[1, S, S]`.
        pub bias: Option<Tensor>,
        /// Range-select lower bound per row (with windows, chunks, zigzag).
        pub lower: Option<Tensor>,
        /// Range-select upper bound per row: exclusive with `lower`, else inclusive.
        pub upper: Option<Tensor>,
        /// Static causal mask (without bounds).
        pub causal: bool,
        /// The local causal pattern: query tile `g` sees no key past `Q_SEQ_TILE_SIZE (g + 1) - 1`.
        pub skip: bool,
    }

    /// A group of up to Q_TILE_GROUP_SIZE query tiles in SBUF (the library's `load_q_dy`).
    #[nki_object]
    pub struct QueryGroup {
        /// Q as `[d_head_tile_size, d_head_n_tiles, rows]`.
        pub q: Tensor,
        /// dY, like Q.
        pub dy: Tensor,
        /// Q transposed to rows, `[P_MAX, d_head_n_tiles, tiles, d_head_tile_size]`.
        pub q_t: Tensor,
        /// dY transposed, like `q_t`.
        pub dy_t: Tensor,
        /// The group's dQ, `[d_head_tile_size, d_head_n_tiles, rows]`.
        pub dq: Tensor,
        /// First query tile.
        pub qg: i64,
        /// Query tiles in the group.
        pub cg: i64,
    }

    /// One key tile and the group's first query tile that sees it.
    #[nki_object]
    pub struct KeyTile {
        /// First key.
        pub k0: i64,
        /// Keys.
        pub kts: i64,
        /// The group's first query tile that sees the tile (the earlier ones see none).
        pub first: i64,
    }

    /// One key tile's P and dS for the query tiles of a group.
    #[nki_object]
    pub struct TileProbs {
        /// P, `[P_MAX, cg, kts]` in the kernel dtype.
        pub p: Tensor,
        /// dS, like P.
        pub ds: Tensor,
        /// Zeros `[P_MAX, 1]`: the lower bound of an inclusive range select.
        pub zero: Tensor,
    }

    /// Head dims split into equal tiles of at most D_HEAD_TILE_MAX: `(tile size, tile count)`.
    #[nki_helper]
    pub(crate) fn head_tiles(dh: i64) -> (i64, i64) {
        let n = (dh + D_HEAD_TILE_MAX - 1) / D_HEAD_TILE_MAX;
        ((dh + n - 1) / n, n)
    }

    /// The per-block configuration of the gradient inputs `fwd` (Q `[B, N, D, S]`,
    /// K `[B, N_kv, D, S]`) on program `lnc_id` of `lnc`: dtypes, head grouping,
    /// head-dim and query tiles.
    #[nki_helper]
    pub(crate) fn block_config(
        fwd: AttentionGradInputs,
        mixed_precision: bool,
        ring: RingAttnFeatures,
        scale: f64,
        lnc: i64,
        lnc_id: i64,
    ) -> RingBwdAttnConfig {
        let [_b, n, dh, sl] = fwd.q_ref.shape();
        let kdt = fwd.q_ref.dtype();
        let (dts, dnt): (i64, i64) = head_tiles(dh);
        RingBwdAttnConfig {
            kernel_dtype: kdt,
            mixed_dtype: if mixed_precision { nl::float32 } else { kdt },
            nheads_per_kv_head: n / fwd.k_ref.shape()[1],
            d_head: dh,
            seqlen: sl,
            d_head_tile_size: dts,
            d_head_n_tiles: dnt,
            q_n_tiles: sl / Q_SEQ_TILE_SIZE,
            lnc,
            lnc_id,
            ring,
            scale,
        }
    }

    /// Loads `width` columns from `c0` of a `[dh, S]` HBM view as `[dts, dnt, len]`
    /// (head-dim tile `t` at `[.., t, ..]`).
    #[nki_helper]
    pub(crate) fn load_head_tiles(src: Hbm, dts: i64, dnt: i64, c0: i64, width: i64, dtype: Dtype) -> Sbuf {
        let t = nl::ndarray([dts, dnt, width], dtype, buffer = nl::sbuf);
        for dt in 0..dnt {
            nisa::dma_copy(t[s![.., dt, ..]], src[s![dt * dts..(dt + 1) * dts, c0..c0 + width]]);
        }
        t
    }

    /// The library's `transpose_tiles`: every `(dts, Q_SEQ_TILE_SIZE)` block of a
    /// `[dts, dnt, Q_SEQ_TILE_SIZE n]` tile transposed on the PE, block `j` of
    /// head-dim tile `t` landing at `[.., t, j, ..]` of a `[P_MAX, dnt, n, dts]` tile.
    #[nki_helper]
    fn transpose_tiles(src: Sbuf, dts: i64, dnt: i64, n: i64) -> Sbuf {
        let out = nl::ndarray([P_MAX, dnt, n, dts], src.dtype(), buffer = nl::sbuf);
        for dt in 0..dnt {
            for j in 0..n {
                let flipped = nl::ndarray([P_MAX, dts], src.dtype(), buffer = nl::psum);
                nisa::nc_transpose(flipped, src[s![.., dt, Q_SEQ_TILE_SIZE * j..Q_SEQ_TILE_SIZE * (j + 1)]]);
                nisa::tensor_copy(out[s![.., dt, j, ..]], flipped);
            }
        }
        out
    }

    /// The library's `compute_rowsum`: `D = rowsum(dY ∘ O)` of one head's queries
    /// (`o` and `dy` its `[D, S]` HBM views), as `[P_MAX, S / P_MAX]`; both are
    /// PE-transposed to rows and multiplied in fp32.
    #[nki_helper]
    pub(crate) fn compute_rowsum(cfg: RingBwdAttnConfig, o: Hbm, dy: Hbm) -> Sbuf {
        let (dts, dnt, sl, qnt) = (cfg.d_head_tile_size, cfg.d_head_n_tiles, cfg.seqlen, cfg.q_n_tiles);
        let kdt = o.dtype();
        let o_tiles: Sbuf = load_head_tiles(o, dts, dnt, 0, sl, kdt);
        let dy_tiles: Sbuf = load_head_tiles(dy, dts, dnt, 0, sl, kdt);
        let dy_rows: Sbuf = transpose_tiles(dy_tiles, dts, dnt, qnt);
        let dos = nl::ndarray([P_MAX, qnt], cfg.mixed_dtype, buffer = nl::sbuf);
        for g in 0..qnt {
            let partial = nl::ndarray([P_MAX, dnt], nl::float32, buffer = nl::sbuf);
            for dt in 0..dnt {
                let o_rows = nl::ndarray([P_MAX, dts], kdt, buffer = nl::psum);
                nisa::nc_transpose(o_rows, o_tiles[s![.., dt, Q_SEQ_TILE_SIZE * g..Q_SEQ_TILE_SIZE * (g + 1)]]);
                let prod = nl::ndarray([P_MAX, dts], nl::float32, buffer = nl::sbuf);
                nisa::tensor_tensor(prod, dy_rows[s![.., dt, g, ..]], o_rows, nl::multiply);
                nisa::tensor_reduce(partial[s![.., dt..dt + 1]], nl::add, prod, 1);
            }
            nisa::tensor_reduce(dos[s![.., g..g + 1]], nl::add, partial, 1);
        }
        dos
    }

    /// The scaled scores of query tile `j` of the group against the key tile, soft
    /// capped (`cap·tanh(scale·s / cap)`, before the masks), plus the bias, then
    /// masked with the FLOAT32_MIN sentinel (bounds, the static causal mask,
    /// segment ids). Returns the masked tile and the raw scores in PSUM.
    #[nki_helper]
    fn masked_scores(
        cfg: RingBwdAttnConfig,
        kv: KvTiles,
        st: StepQueries,
        grp: QueryGroup,
        kt: KeyTile,
        zero: Sbuf,
        j: i64,
    ) -> (Sbuf, Tensor) {
        let (k0, kts, scale) = (kt.k0, kt.kts, cfg.scale);
        let soft_cap = cfg.ring.soft_cap;
        let cap = soft_cap.unwrap_or(0.0);
        let g = grp.qg + j;
        let biased = st.bias.is_some();
        let scores = nl::ndarray([P_MAX, kts], nl::float32, buffer = nl::psum);
        for dt in 0..cfg.d_head_n_tiles {
            nisa::nc_matmul(scores, grp.q[s![.., dt, Q_SEQ_TILE_SIZE * j..Q_SEQ_TILE_SIZE * (j + 1)]], kv.k[s![.., dt, k0..k0 + kts]]);
        }
        let masked = nl::ndarray([P_MAX, kts], nl::float32, buffer = nl::sbuf);
        // Soft cap: logits cap·tanh(scale·s / cap), capped before the masks (the exp then takes no scale).
        if cap > 0.0 {
            nisa::activation(masked, nl::tanh, scores, scale = scale / cap);
            nisa::tensor_scalar(masked, masked, nl::multiply, cap);
        }
        let capped = if cap > 0.0 { masked } else { scores };
        let cap_scale = if cap > 0.0 { 1.0 } else { scale };
        // Bias: scaled (and capped) logits plus the bias tile, before the masks (the exp then takes no scale).
        if let Some(bb) = st.bias {
            let bt = nl::ndarray([P_MAX, kts], nl::float32, buffer = nl::sbuf);
            nisa::dma_copy(bt, bb[s![0, Q_SEQ_TILE_SIZE * g..Q_SEQ_TILE_SIZE * (g + 1), k0..k0 + kts]]);
            nisa::scalar_tensor_tensor(masked, capped, nl::multiply, cap_scale, nl::add, bt);
        }
        let src = if biased { masked } else { capped };
        if let Some(ub) = st.upper {
            if let Some(lb) = st.lower {
                nisa::range_select(
                    masked,
                    src,
                    nl::greater_equal,
                    nl::less,
                    lb[s![.., g..g + 1]],
                    ub[s![.., g..g + 1]],
                    range_start = k0,
                    on_false_value = f32::MIN,
                );
            } else {
                nisa::range_select(
                    masked,
                    src,
                    nl::greater_equal,
                    nl::less_equal,
                    zero,
                    ub[s![.., g..g + 1]],
                    range_start = k0,
                    on_false_value = f32::MIN,
                );
            }
        } else {
            nisa::tensor_copy(masked, src);
            if st.causal && Q_SEQ_TILE_SIZE * g < k0 + kts - 1 {
                nisa::affine_select(
                    masked,
                    [[-1, kts]],
                    1,
                    masked,
                    f32::MIN,
                    cmp_op = nl::greater_equal,
                    offset = Q_SEQ_TILE_SIZE * g - k0,
                );
            }
        }
        // Segment ids: the sentinel where the ids differ.
        mask_segments(masked, masked, 1.0, kv.k_ids, k0, st.q_ids, g);
        (masked, scores)
    }

    /// The scale the exp applies to the masked scores: none once the soft cap or
    /// the bias has scaled them.
    #[nki_helper]
    fn exp_scale(cfg: RingBwdAttnConfig, st: StepQueries) -> f64 {
        let unscaled = st.bias.is_some() || cfg.ring.soft_cap.is_some();
        let scale = if unscaled { 1.0 } else { cfg.scale };
        scale
    }

    /// The library's `recompute_qk_softmax` for query tile `j` of the group:
    /// `P = exp(masked scores − LSE)` into `probs.p[:, j]`; returns the raw scores.
    #[nki_helper]
    fn recompute_qk_softmax(
        cfg: RingBwdAttnConfig,
        kv: KvTiles,
        st: StepQueries,
        grp: QueryGroup,
        kt: KeyTile,
        probs: TileProbs,
        j: i64,
    ) -> Tensor {
        let g = grp.qg + j;
        let (masked, scores): (Sbuf, Tensor) = masked_scores(cfg, kv, st, grp, kt, probs.zero, j);
        let scale: f64 = exp_scale(cfg, st);
        nisa::activation(probs.p[s![.., j, ..]], nl::exp, masked, bias = st.neg_lse[s![.., g..g + 1]], scale = scale);
        scores
    }

    /// The library's `compute_softmax_backward_dx` for query tile `j`:
    /// `dS = P ∘ (dY·Vᵀ − D)`, through the soft cap `dS ∘ (1 - tanh²(scale·s / cap))`.
    #[nki_helper]
    fn compute_softmax_backward_dx(
        cfg: RingBwdAttnConfig,
        kv: KvTiles,
        st: StepQueries,
        grp: QueryGroup,
        kt: KeyTile,
        probs: TileProbs,
        j: i64,
        scores: Tensor,
    ) {
        let (k0, kts) = (kt.k0, kt.kts);
        let soft_cap = cfg.ring.soft_cap;
        let cap = soft_cap.unwrap_or(0.0);
        let g = grp.qg + j;
        let dp = nl::ndarray([P_MAX, kts], nl::float32, buffer = nl::psum);
        for dt in 0..cfg.d_head_n_tiles {
            nisa::nc_matmul(dp, grp.dy[s![.., dt, Q_SEQ_TILE_SIZE * j..Q_SEQ_TILE_SIZE * (j + 1)]], kv.v[s![.., dt, k0..k0 + kts]]);
        }
        nisa::scalar_tensor_tensor(
            probs.ds[s![.., j, ..]],
            dp,
            nl::subtract,
            st.dos[s![.., g..g + 1]],
            nl::multiply,
            probs.p[s![.., j, ..]],
        );
        if cap > 0.0 {
            let slope = nl::ndarray([P_MAX, kts], nl::float32, buffer = nl::sbuf);
            nisa::activation(slope, nl::tanh, scores, scale = cfg.scale / cap);
            nisa::tensor_tensor(slope, slope, slope, nl::multiply);
            nisa::tensor_scalar(slope, slope, nl::multiply, -1.0, op1 = nl::add, operand1 = 1.0);
            nisa::tensor_tensor(probs.ds[s![.., j, ..]], probs.ds[s![.., j, ..]], slope, nl::multiply);
        }
    }

    /// dQ += scale · dS·K for the group's computed query tiles, contracting over
    /// keys: Kᵀ and dSᵀ in K_SEQ_TILE_SIZE_BACKWARD-key blocks.
    #[nki_helper]
    fn accumulate_dq(cfg: RingBwdAttnConfig, kv: KvTiles, grp: QueryGroup, kt: KeyTile, probs: TileProbs) {
        let (k0, first, cg, dts, dnt) = (kt.k0, kt.first, grp.cg, cfg.d_head_tile_size, cfg.d_head_n_tiles);
        let kdt = kv.k.dtype();
        let kb_sz = K_SEQ_TILE_SIZE_BACKWARD;
        let nb = kt.kts / kb_sz;
        let k_rows = nl::ndarray([P_MAX, dnt, nb, dts], kdt, buffer = nl::sbuf);
        for dt in 0..dnt {
            for kb in 0..nb {
                let flipped = nl::ndarray([P_MAX, dts], kdt, buffer = nl::psum);
                nisa::nc_transpose(flipped, kv.k[s![.., dt, k0 + kb_sz * kb..k0 + kb_sz * (kb + 1)]]);
                nisa::tensor_copy(k_rows[s![.., dt, kb, ..]], flipped);
            }
        }
        let ds_t = nl::ndarray([P_MAX, nb, cg, Q_SEQ_TILE_SIZE], kdt, buffer = nl::sbuf);
        for kb in 0..nb {
            for j in first..cg {
                let flipped = nl::ndarray([P_MAX, Q_SEQ_TILE_SIZE], kdt, buffer = nl::psum);
                nisa::nc_transpose(flipped, probs.ds[s![.., j, kb_sz * kb..kb_sz * (kb + 1)]]);
                nisa::tensor_copy(ds_t[s![.., kb, j, ..]], flipped);
            }
        }
        // Only the computed tiles' columns of the dQ partial: the first matmul into a
        // column overwrites it and the later ones add. Zeroing the other columns with a
        // memset instead (the library's way) would make the matmuls accumulate onto
        // memset values, undefined behaviour on trn1/trn2.
        let (c0, c1) = (Q_SEQ_TILE_SIZE * first, Q_SEQ_TILE_SIZE * cg);
        for dt in 0..dnt {
            let dq_ps = nl::ndarray([dts, Q_SEQ_TILE_SIZE * cg], nl::float32, buffer = nl::psum);
            for kb in 0..nb {
                for j in first..cg {
                    nisa::nc_matmul(
                        dq_ps[s![.., Q_SEQ_TILE_SIZE * j..Q_SEQ_TILE_SIZE * (j + 1)]],
                        k_rows[s![.., dt, kb, ..]],
                        ds_t[s![.., kb, j, ..]],
                    );
                }
            }
            nisa::scalar_tensor_tensor(
                grp.dq[s![.., dt, c0..c1]],
                dq_ps[s![.., c0..c1]],
                nl::multiply,
                cfg.scale,
                nl::add,
                grp.dq[s![.., dt, c0..c1]],
            );
        }
    }

    /// dV += Pᵀ·dY and dK += scale · dSᵀ·Q, contracting over the group's queries.
    #[nki_helper]
    fn accumulate_dk_dv(cfg: RingBwdAttnConfig, kv: KvTiles, grp: QueryGroup, kt: KeyTile, probs: TileProbs) {
        let (k0, kts, first, dts) = (kt.k0, kt.kts, kt.first, cfg.d_head_tile_size);
        for dt in 0..cfg.d_head_n_tiles {
            let dv_ps = nl::ndarray([dts, kts], nl::float32, buffer = nl::psum);
            let dk_ps = nl::ndarray([dts, kts], nl::float32, buffer = nl::psum);
            for j in first..grp.cg {
                nisa::nc_matmul(dv_ps, grp.dy_t[s![.., dt, j, ..]], probs.p[s![.., j, ..]]);
                nisa::nc_matmul(dk_ps, grp.q_t[s![.., dt, j, ..]], probs.ds[s![.., j, ..]]);
            }
            nisa::tensor_tensor(kv.dv[s![.., dt, k0..k0 + kts]], kv.dv[s![.., dt, k0..k0 + kts]], dv_ps, nl::add);
            nisa::scalar_tensor_tensor(
                kv.dk[s![.., dt, k0..k0 + kts]],
                dk_ps,
                nl::multiply,
                cfg.scale,
                nl::add,
                kv.dk[s![.., dt, k0..k0 + kts]],
            );
        }
    }

    /// One key tile against the query tiles `first..cg` of a group: recomputes P,
    /// forms dS, and accumulates dQ (into the group's), dK and dV.
    #[nki_helper]
    pub(crate) fn bwd_tile(cfg: RingBwdAttnConfig, kv: KvTiles, st: StepQueries, grp: QueryGroup, kt: KeyTile) {
        let kdt = kv.k.dtype();
        let probs = TileProbs {
            p: nl::ndarray([P_MAX, grp.cg, kt.kts], kdt, buffer = nl::sbuf),
            ds: nl::ndarray([P_MAX, grp.cg, kt.kts], kdt, buffer = nl::sbuf),
            zero: nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf),
        };
        nisa::memset(probs.zero, 0.0);
        for j in kt.first..grp.cg {
            let scores: Tensor = recompute_qk_softmax(cfg, kv, st, grp, kt, probs, j);
            compute_softmax_backward_dx(cfg, kv, st, grp, kt, probs, j, scores);
        }
        accumulate_dq(cfg, kv, grp, kt, probs);
        accumulate_dk_dv(cfg, kv, grp, kt, probs);
    }

    /// The library's `load_q_dy`: query tiles `qg..qg + cg` of the visiting Q and
    /// dY, their transposes, and a zeroed dQ.
    #[nki_helper]
    pub(crate) fn load_q_dy(cfg: RingBwdAttnConfig, st: StepQueries, qg: i64, cg: i64) -> QueryGroup {
        let (dts, dnt, kdt) = (cfg.d_head_tile_size, cfg.d_head_n_tiles, cfg.kernel_dtype);
        let q: Sbuf = load_head_tiles(st.q, dts, dnt, Q_SEQ_TILE_SIZE * qg, Q_SEQ_TILE_SIZE * cg, kdt);
        let dy: Sbuf = load_head_tiles(st.dy, dts, dnt, Q_SEQ_TILE_SIZE * qg, Q_SEQ_TILE_SIZE * cg, kdt);
        let q_t: Sbuf = transpose_tiles(q, dts, dnt, cg);
        let dy_t: Sbuf = transpose_tiles(dy, dts, dnt, cg);
        let dq = nl::ndarray([dts, dnt, Q_SEQ_TILE_SIZE * cg], cfg.mixed_dtype, buffer = nl::sbuf);
        nisa::memset(dq, 0.0);
        QueryGroup { q, dy, q_t, dy_t, dq, qg, cg }
    }

    /// One ring step for one query head: the visiting queries against the local K/V,
    /// dK/dV accumulated in place and this step's dQ written to `dq_out` (`[dh, S]`, fp32).
    #[nki_helper]
    fn compute_step(cfg: RingBwdAttnConfig, kv: KvTiles, st: StepQueries, dq_out: Hbm) {
        let (sl, qnt, dts) = (cfg.seqlen, cfg.q_n_tiles, cfg.d_head_tile_size);
        for qg in (0..qnt).step_by(Q_TILE_GROUP_SIZE) {
            let cg = (qnt - qg).min(Q_TILE_GROUP_SIZE);
            let grp: QueryGroup = load_q_dy(cfg, st, qg, cg);
            for kt in 0..(sl + K_SEQ_TILE_SIZE - 1) / K_SEQ_TILE_SIZE {
                let k0 = kt * K_SEQ_TILE_SIZE;
                // Under the local causal pattern (`skip`) query tile `g` sees keys up to
                // Q_SEQ_TILE_SIZE (g + 1) - 1, so the group's tiles `qg + first..qg + cg`
                // see some of the key tile at k0 and the ones before them none.
                let first = if st.skip { (k0 / Q_SEQ_TILE_SIZE - qg).max(0).min(cg) } else { 0 };
                if first < cg {
                    bwd_tile(cfg, kv, st, grp, KeyTile { k0, kts: (sl - k0).min(K_SEQ_TILE_SIZE), first });
                }
            }
            for dt in 0..cfg.d_head_n_tiles {
                nisa::dma_copy(
                    dq_out[s![dt * dts..(dt + 1) * dts, Q_SEQ_TILE_SIZE * qg..Q_SEQ_TILE_SIZE * (qg + cg)]],
                    grp.dq[s![.., dt, ..]],
                );
            }
        }
    }

    /// The range-select bounds of ring step `step` per query row (`[P_MAX, S / P_MAX]`):
    /// `(lower, exclusive upper)` from the masks with windows, chunks or zigzag
    /// blocks (`bounded`); else, with the causal mask after step 0, `(None, inclusive
    /// upper)` in local key coordinates, keeping `0 <= k <= row + offset` (contiguous
    /// offset `(q_pos - k_pos)·S`, striped `-min(max(k_pos - q_pos, 0), 1)`); else none.
    #[nki_helper]
    fn step_bounds(cfg: RingBwdAttnConfig, positions: Hbm, step: i64) -> (Option<Sbuf>, Option<Sbuf>) {
        let (sl, groups) = (cfg.seqlen, cfg.ring.replica_groups);
        if cfg.ring.bounded {
            let (my_pos, q_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
            let rows: Sbuf = row_positions(q_pos, cfg.ring, sl);
            let (lower, upper): (Sbuf, Sbuf) = key_bounds(rows, my_pos, cfg.ring, sl);
            return (Some(lower), Some(upper));
        }
        if cfg.ring.causal && step > 0 {
            let (my_pos, q_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
            let ub = nl::ndarray([P_MAX, cfg.q_n_tiles], nl::float32, buffer = nl::sbuf);
            nisa::iota(ub, [[P_MAX, cfg.q_n_tiles]], channel_multiplier = 1);
            let off = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
            if cfg.ring.striped {
                nisa::tensor_tensor(off, my_pos, q_pos, nl::subtract);
                nisa::tensor_scalar(off, off, nl::maximum, 0.0, op1 = nl::minimum, operand1 = 1.0);
                nisa::tensor_scalar(ub, ub, nl::subtract, off);
            } else {
                nisa::tensor_tensor(off, q_pos, my_pos, nl::subtract);
                nisa::tensor_scalar(off, off, nl::multiply, sl as f64);
                nisa::tensor_scalar(ub, ub, nl::add, off);
            }
            return (None, Some(ub));
        }
        (None, None)
    }

    /// `[P_MAX, S / P_MAX]` negated log-sum-exps of a `[P_MAX, S / P_MAX]` HBM view.
    /// With segment ids a row that saw no key has LSE `-inf`: its `-LSE` becomes
    /// FLOAT32_MIN, so its P (every score masked) is 0 instead of `exp(inf)`.
    #[nki_helper]
    pub(crate) fn load_neg_lse(src: Hbm, mdt: Dtype, segmented: bool) -> Sbuf {
        let t = nl::ndarray(src.shape(), mdt, buffer = nl::sbuf);
        nisa::dma_copy(t, src);
        nisa::tensor_scalar(t, t, nl::multiply, -1.0);
        if segmented {
            // t·m + (m - 1)·FLOAT32_MAX with m = [t finite], after clamping t to be finite.
            let m = nl::ndarray(src.shape(), nl::float32, buffer = nl::sbuf);
            nisa::tensor_scalar(t, t, nl::minimum, f32::MAX);
            nisa::tensor_scalar(m, t, nl::less, 1.0e38);
            nisa::tensor_tensor(t, t, m, nl::multiply);
            nisa::tensor_scalar(m, m, nl::subtract, 1.0, op1 = nl::multiply, operand1 = f32::MAX);
            nisa::tensor_tensor(t, t, m, nl::add);
        }
        t
    }

    /// Stages `-LSE` and `D` of query head `hid` in `stats` (`[2, P_MAX, S / P_MAX]`)
    /// and, with sinks, writes this rank's share of the head's sink gradient.
    #[nki_helper]
    fn stage_row_stats(cfg: RingBwdAttnConfig, io: RingBwdTensors, stats: Hbm, dsink_part: Hbm, bid: i64, hid: i64) {
        let neg_lse: Sbuf = load_neg_lse(io.fwd.lse_ref[s![bid, hid, .., ..]], cfg.mixed_dtype, cfg.ring.segmented);
        let dos: Sbuf = compute_rowsum(cfg, io.fwd.o_ref[s![bid, hid, .., ..]], io.fwd.dy_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(stats[s![0, .., ..]], neg_lse);
        nisa::dma_copy(stats[s![1, .., ..]], dos);
        if let Some(sk) = io.sinks {
            sink_grad(sk, neg_lse, dos, dsink_part, bid, hid);
        }
    }

    /// This rank's share of the sink gradient of query head `hid` of batch `bid`,
    /// `-Σ_i exp(sink - LSE_i)·D_i` over the local rows, written to
    /// `dsink_part[bid, hid]` (`neg_lse` and `dos` are the local `-LSE` and `D`).
    #[nki_helper]
    pub(crate) fn sink_grad(sinks: Hbm, neg_lse: Sbuf, dos: Sbuf, dsink_part: Hbm, bid: i64, hid: i64) {
        let n = dsink_part.shape()[1];
        let sink: Sbuf = scalar_column(sinks.ap([[1, 1], [1, 1]], offset = hid));
        let weighted = nl::ndarray(neg_lse.shape(), nl::float32, buffer = nl::sbuf);
        nisa::activation(weighted, nl::exp, neg_lse, bias = sink);
        nisa::tensor_tensor(weighted, weighted, dos, nl::multiply);
        let rows = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(rows, nl::add, weighted, 1);
        let minus_one = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(minus_one, -1.0);
        let total = nl::ndarray([1, 1], nl::float32, buffer = nl::psum);
        nisa::nc_matmul(total, rows, minus_one);
        let out = nl::ndarray([1, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(out, total);
        nisa::dma_copy(dsink_part.ap([[1, 1], [1, 1]], offset = bid * n + hid), out);
    }

    /// Sends Q, dY, LSE and D of every LNC slot of `send` to the ring successor's
    /// `recv`, and the queries' segment ids and bias rows when there are any.
    #[nki_helper]
    fn permute_all(send: QueryBlock, recv: QueryBlock, groups: Groups) {
        let rg = ncc::ReplicaGroup(groups);
        ncc::collective_permute_implicit([[send.q]], [[recv.q]], rg);
        ncc::collective_permute_implicit([[send.dy]], [[recv.dy]], rg);
        ncc::collective_permute_implicit([[send.lse]], [[recv.lse]], rg);
        ncc::collective_permute_implicit([[send.dos]], [[recv.dos]], rg);
        pass_optional(send.ids, recv.ids, groups);
        pass_optional(send.bias, recv.bias, groups);
    }

    /// The ring buffers of one side, one slot per LNC program.
    #[nki_helper]
    fn allocate_query_block(cfg: RingBwdAttnConfig, biased: bool) -> QueryBlock {
        let (lnc, dh, sl) = (cfg.lnc, cfg.d_head, cfg.seqlen);
        let kdt = cfg.kernel_dtype;
        QueryBlock {
            q: nl::ndarray([lnc, dh, sl], kdt, buffer = nl::shared_hbm),
            dy: nl::ndarray([lnc, dh, sl], kdt, buffer = nl::shared_hbm),
            lse: nl::ndarray([lnc, P_MAX, cfg.q_n_tiles], nl::float32, buffer = nl::shared_hbm),
            dos: nl::ndarray([lnc, P_MAX, cfg.q_n_tiles], nl::float32, buffer = nl::shared_hbm),
            ids: if cfg.ring.segmented {
                Some(nl::ndarray([lnc, P_MAX, cfg.q_n_tiles], nl::float32, buffer = nl::shared_hbm))
            } else {
                None
            },
            // The bias rows travel with their queries.
            bias: if biased { Some(nl::ndarray([lnc, sl, cfg.ring.num_workers * sl], nl::float32, buffer = nl::shared_hbm)) } else { None },
        }
    }

    /// The library's `load_kv`: K, V and zeroed dK, dV of KV head `kvh` of batch
    /// `bid` in SBUF, with the segment ids in fp32: the local keys' on every
    /// partition, the local queries' as `[P_MAX, S / P_MAX]` rows (they travel with Q).
    #[nki_helper]
    fn load_kv(cfg: RingBwdAttnConfig, io: RingBwdTensors, bid: i64, kvh: i64) -> KvTiles {
        let (sl, qnt) = (cfg.seqlen, cfg.q_n_tiles);
        let k_ids = if cfg.ring.segmented { Some(nl::ndarray([P_MAX, sl], nl::float32, buffer = nl::sbuf)) } else { None };
        let own_q_ids = if cfg.ring.segmented { Some(nl::ndarray([P_MAX, qnt], nl::float32, buffer = nl::sbuf)) } else { None };
        if let Some(ks) = io.ring.kv_segment_ids {
            if let Some(ki) = k_ids {
                nisa::dma_copy(ki, ks.ap([[0, P_MAX], [1, sl]], offset = bid * sl));
            }
        }
        if let Some(qs) = io.ring.q_segment_ids {
            if let Some(qi) = own_q_ids {
                nisa::dma_copy(qi, qs.ap([[1, P_MAX], [P_MAX, qnt]], offset = bid * sl));
            }
        }
        load_kv_tiles(cfg, io.fwd.k_ref[s![bid, kvh, .., ..]], io.fwd.v_ref[s![bid, kvh, .., ..]], 0, sl, k_ids, own_q_ids)
    }

    /// K and V of the `width` keys from `k_start` of one KV head's `[D, S]` views
    /// in SBUF with zeroed dK, dV accumulators and the given segment ids: what the
    /// library's `load_kv` leaves in SBUF, in both backward kernels.
    #[nki_helper]
    pub(crate) fn load_kv_tiles(
        cfg: RingBwdAttnConfig,
        k_ref: Hbm,
        v_ref: Hbm,
        k_start: i64,
        width: i64,
        k_ids: Option<Tensor>,
        own_q_ids: Option<Tensor>,
    ) -> KvTiles {
        let (dts, dnt, mdt) = (cfg.d_head_tile_size, cfg.d_head_n_tiles, cfg.mixed_dtype);
        let k: Sbuf = load_head_tiles(k_ref, dts, dnt, k_start, width, cfg.kernel_dtype);
        let v: Sbuf = load_head_tiles(v_ref, dts, dnt, k_start, width, cfg.kernel_dtype);
        let dk = nl::ndarray([dts, dnt, width], mdt, buffer = nl::sbuf);
        let dv = nl::ndarray([dts, dnt, width], mdt, buffer = nl::sbuf);
        nisa::memset(dk, 0.0);
        nisa::memset(dv, 0.0);
        KvTiles { k, v, dk, dv, k_ids, own_q_ids }
    }

    /// Waits for both LNC programs' writes to the ring buffers of `send` (no-op on one program).
    #[nki_helper]
    fn barrier_query_block(cfg: RingBwdAttnConfig, send: QueryBlock) {
        if cfg.lnc > 1 {
            nisa::core_barrier(send.q, [0, 1]);
            nisa::core_barrier(send.dy, [0, 1]);
            nisa::core_barrier(send.lse, [0, 1]);
            nisa::core_barrier(send.dos, [0, 1]);
            if let Some(si) = send.ids {
                nisa::core_barrier(si, [0, 1]);
            }
            if let Some(sb) = send.bias {
                nisa::core_barrier(sb, [0, 1]);
            }
        }
    }

    /// Copies the own queries of head `hid` (Q, dY, LSE, `D`, ids and bias rows)
    /// into this program's slot of `send` and sends them around the ring.
    #[nki_helper]
    fn send_own_queries(
        cfg: RingBwdAttnConfig,
        io: RingBwdTensors,
        kv: KvTiles,
        send: QueryBlock,
        recv: QueryBlock,
        dos: Sbuf,
        bid: i64,
        hid: i64,
    ) {
        let slot = cfg.lnc_id;
        nisa::dma_copy(send.q[s![slot, .., ..]], io.fwd.q_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(send.dy[s![slot, .., ..]], io.fwd.dy_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(send.lse[s![slot, .., ..]], io.fwd.lse_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(send.dos[s![slot, .., ..]], dos);
        let (send_ids, own_q_ids) = (send.ids, kv.own_q_ids);
        if let Some(si) = send_ids {
            if let Some(qi) = own_q_ids {
                nisa::dma_copy(si[s![slot, .., ..]], qi);
            }
        }
        let (bias, send_bias) = (io.ring.bias, send.bias);
        if let Some(bi) = bias {
            if let Some(sb) = send_bias {
                nisa::dma_copy(sb[s![slot, .., ..]], bi[s![bid, hid, .., ..]]);
            }
        }
        barrier_query_block(cfg, send);
        if cfg.ring.num_workers > 1 {
            permute_all(send, recv, cfg.ring.replica_groups);
        }
    }

    /// The bias of the queries in this program's slot of `rows` (`[lnc, S, W·S]`,
    /// their rows against every key at its global position) against this rank's
    /// keys, `[1, S, S]` (None without a bias).
    #[nki_helper]
    fn own_key_columns(cfg: RingBwdAttnConfig, rows: Option<Hbm>, positions: Hbm) -> Option<Hbm> {
        if let Some(r) = rows {
            let [lnc, sl, total] = r.shape();
            let (mine, _same): (Sbuf, Sbuf) = ring_positions_at(positions, cfg.ring.replica_groups, 0);
            let slots = r.reshape([lnc, 1, sl, total]);
            return Some(bias_block(slots, cfg.lnc_id, 1, mine, cfg.ring));
        }
        None
    }

    /// Step 0 of the ring for one query head: the own queries (staged in `send`)
    /// against the own keys, under the local masks; their dQ starts around the ring.
    #[nki_helper]
    fn ring_bwd_own_step(cfg: RingBwdAttnConfig, io: RingBwdTensors, kv: KvTiles, send: QueryBlock, dqr: DqRing, neg_lse: Sbuf, dos: Sbuf) {
        let slot = cfg.lnc_id;
        let own_bias: Option<Hbm> = own_key_columns(cfg, send.bias, io.ring.positions);
        let dq_slot = dqr.scratch[s![slot, .., ..]];
        let (lower, upper): (Option<Sbuf>, Option<Sbuf>) = step_bounds(cfg, io.ring.positions, 0);
        let local_causal = cfg.ring.causal && !cfg.ring.bounded;
        let st = StepQueries {
            q: send.q[s![slot, .., ..]],
            dy: send.dy[s![slot, .., ..]],
            neg_lse,
            dos,
            q_ids: kv.own_q_ids,
            bias: own_bias,
            lower,
            upper,
            causal: local_causal,
            skip: local_causal,
        };
        compute_step(cfg, kv, st, dq_slot);
        nisa::dma_copy(dqr.send[s![slot, .., ..]], dq_slot);
        if cfg.lnc > 1 {
            nisa::core_barrier(dqr.send, [0, 1]);
        }
        ncc::collective_permute_implicit([[dqr.send]], [[dqr.recv]], ncc::ReplicaGroup(cfg.ring.replica_groups));
    }

    /// Ring step `step >= 1` for one query head: the queries that arrived in `cur`
    /// against the local keys. The next step's data leaves from `cur` for `nxt`
    /// before the compute, and this rank's part of their dQ joins the partial sum
    /// (arriving in `dq_in`, leaving from `dq_fwd`) on its way home.
    #[nki_helper]
    fn ring_bwd_step(
        cfg: RingBwdAttnConfig,
        io: RingBwdTensors,
        kv: KvTiles,
        cur: QueryBlock,
        nxt: QueryBlock,
        dqr: DqRing,
        step: i64,
        odd: bool,
    ) {
        let (slot, nw, groups) = (cfg.lnc_id, cfg.ring.num_workers, cfg.ring.replica_groups);
        let rg = ncc::ReplicaGroup(groups);
        let dq_in = if odd { dqr.recv } else { dqr.send };
        let dq_fwd = if odd { dqr.send } else { dqr.recv };
        let step_bias: Option<Hbm> = own_key_columns(cfg, cur.bias, io.ring.positions);
        let neg_lse: Sbuf = load_neg_lse(cur.lse[s![slot, .., ..]], cfg.mixed_dtype, cfg.ring.segmented);
        let q_ids = if cfg.ring.segmented { Some(nl::ndarray([P_MAX, cfg.q_n_tiles], nl::float32, buffer = nl::sbuf)) } else { None };
        if let Some(ci) = cur.ids {
            if let Some(qi) = q_ids {
                nisa::dma_copy(qi, ci[s![slot, .., ..]]);
            }
        }
        let dos = nl::ndarray([P_MAX, cfg.q_n_tiles], cfg.mixed_dtype, buffer = nl::sbuf);
        nisa::dma_copy(dos, cur.dos[s![slot, .., ..]]);
        let (lower, upper): (Option<Sbuf>, Option<Sbuf>) = step_bounds(cfg, io.ring.positions, step);
        // The next step's data goes out before this step's compute.
        if step + 1 < nw {
            permute_all(cur, nxt, groups);
        }
        // Step t shows position me - t's queries this rank's keys: the keys t
        // positions ahead of the queries, the forward's step W - t.
        let needed: bool = !cfg.ring.bounded || step_needed(nw - step, cfg.ring, cfg.seqlen);
        if needed {
            let st = StepQueries {
                q: cur.q[s![slot, .., ..]],
                dy: cur.dy[s![slot, .., ..]],
                neg_lse,
                dos,
                q_ids,
                bias: step_bias,
                lower,
                upper,
                causal: cfg.ring.causal,
                skip: cfg.ring.causal && cfg.ring.striped && !cfg.ring.bounded,
            };
            compute_step(cfg, kv, st, dqr.scratch[s![slot, .., ..]]);
            if cfg.lnc > 1 {
                nisa::core_barrier(dqr.scratch, [0, 1]);
            }
            ncc::collective_permute_implicit_reduce([[dqr.scratch]], [[dq_in]], [[dq_fwd]], rg, nl::add);
        } else {
            // No rank sees these keys: the partial dQ travels on unchanged.
            ncc::collective_permute_implicit([[dq_in]], [[dq_fwd]], rg);
        }
    }

    /// The whole ring for query head `hid` of batch `bid` (its `-LSE` and `D` staged
    /// in `stats`): the own queries start around the ring, every step adds to dK/dV
    /// in `kv`, and the complete dQ of the own queries comes home.
    #[nki_helper]
    fn ring_bwd_head(
        cfg: RingBwdAttnConfig,
        io: RingBwdTensors,
        grads: RingBwdGrads,
        kv: KvTiles,
        send: QueryBlock,
        recv: QueryBlock,
        dqr: DqRing,
        stats: Hbm,
        bid: i64,
        hid: i64,
    ) {
        let neg_lse = nl::ndarray([P_MAX, cfg.q_n_tiles], cfg.mixed_dtype, buffer = nl::sbuf);
        let dos = nl::ndarray([P_MAX, cfg.q_n_tiles], cfg.mixed_dtype, buffer = nl::sbuf);
        nisa::dma_copy(neg_lse, stats[s![0, .., ..]]);
        nisa::dma_copy(dos, stats[s![1, .., ..]]);
        // The local queries start around the ring; step 0 runs on them meanwhile.
        send_own_queries(cfg, io, kv, send, recv, dos, bid, hid);
        ring_bwd_own_step(cfg, io, kv, send, dqr, neg_lse, dos);
        for step in nl::sequential_range(1, cfg.ring.num_workers) {
            // Odd steps find the visiting data in the receive buffers, even steps in the send ones.
            let odd = step % 2 == 1;
            if odd {
                ring_bwd_step(cfg, io, kv, recv, send, dqr, step, odd);
            } else {
                ring_bwd_step(cfg, io, kv, send, recv, dqr, step, odd);
            }
        }
        // After the last exchange the complete dQ of the local queries is back here.
        let dq_home = if cfg.ring.num_workers % 2 == 0 { dqr.send } else { dqr.recv };
        nisa::dma_copy(grads.dq[s![bid, hid, .., ..]], dq_home[s![cfg.lnc_id, .., ..]]);
    }

    /// Writes the dK and dV accumulators of `kv` into `dk` and `dv` (`[D, keys]`
    /// HBM views), one head-dim tile at a time.
    #[nki_helper]
    pub(crate) fn store_kv_grads(cfg: RingBwdAttnConfig, kv: KvTiles, dk: Hbm, dv: Hbm) {
        let dts = cfg.d_head_tile_size;
        for dt in 0..cfg.d_head_n_tiles {
            nisa::dma_copy(dk[s![dt * dts..(dt + 1) * dts, ..]], kv.dk[s![.., dt, ..]]);
            nisa::dma_copy(dv[s![dt * dts..(dt + 1) * dts, ..]], kv.dv[s![.., dt, ..]]);
        }
    }

    /// The whole ring for KV head `kvh` of batch `bid`: the row statistics of its
    /// query heads staged in HBM before K and V take their SBUF (D's transposes need
    /// the room), K and V loaded once, then one ring per query head of its group,
    /// each adding to the same dK/dV. Program `lnc_id` uses slot `lnc_id` of every
    /// ring buffer, and every program issues the same collectives.
    #[nki_helper]
    fn ring_bwd_item(
        cfg: RingBwdAttnConfig,
        io: RingBwdTensors,
        grads: RingBwdGrads,
        send: QueryBlock,
        recv: QueryBlock,
        dqr: DqRing,
        bid: i64,
        kvh: i64,
    ) {
        let group = cfg.nheads_per_kv_head;
        let stats = nl::ndarray([group, 2, P_MAX, cfg.q_n_tiles], cfg.mixed_dtype, buffer = nl::private_hbm);
        for qh in 0..group {
            stage_row_stats(cfg, io, stats[s![qh, .., .., ..]], grads.dsink_part, bid, kvh * group + qh);
        }
        let kv: KvTiles = load_kv(cfg, io, bid, kvh);
        for qh in 0..group {
            ring_bwd_head(cfg, io, grads, kv, send, recv, dqr, stats[s![qh, .., .., ..]], bid, kvh * group + qh);
        }
        store_kv_grads(cfg, kv, grads.dk[s![bid, kvh, .., ..]], grads.dv[s![bid, kvh, .., ..]]);
    }

    /// `dsinks [N]`: the per-(batch, head) shares in `parts` (`[B, N]`) summed over the
    /// batch (after both LNC programs wrote theirs).
    #[nki_helper]
    fn sum_sink_parts(parts: Hbm, lnc: i64, lnc_id: i64) -> Hbm {
        let [b, n] = parts.shape();
        if lnc > 1 {
            nisa::core_barrier(parts, [0, 1]);
        }
        let out = nl::ndarray([n], nl::float32, buffer = nl::shared_hbm);
        let all = nl::ndarray([1, b * n], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(all, parts.reshape([1, b * n]));
        let acc = nl::ndarray([1, n], nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(acc, all[s![.., 0..n]]);
        for bi in 1..b {
            nisa::tensor_tensor(acc, acc, all[s![.., bi * n..(bi + 1) * n]], nl::add);
        }
        if lnc_id == 0 {
            nisa::dma_copy(out.reshape([1, n]), acc);
        }
        out
    }

    /// The shapes and dtypes of the inputs (the library checks none but `q_ref`;
    /// mismatches would read out of bounds).
    #[nki_helper]
    fn check_shapes(io: AttentionGradInputs) {
        let q_shape = io.q_ref.shape();
        assert!(io.q_ref.ndim() == 4, "q_ref must be [B, N, D, S], got {q_shape}");
        let [_b, n, _dh, sl] = q_shape;
        assert!(sl >= Q_SEQ_TILE_SIZE && sl % Q_SEQ_TILE_SIZE == 0, crate::ring_rules::SEQLEN_MULTIPLE);
        let n_kv = io.k_ref.shape()[1];
        assert!(n_kv >= 1 && n % n_kv == 0, crate::ring_rules::KV_HEADS);
        check_grad_shapes(io, true);
    }

    /// The shapes and dtypes every attention backward's inputs share, `q_ref`
    /// being 4-d: K `[B, N_kv, D, S]` (its `S` q's when `same_seqlen`), V like K,
    /// O and dY like Q, the log-sum-exp `[B, N, 128, S / 128]` of the queries, one
    /// dtype for all but the log-sum-exp.
    #[nki_helper]
    pub(crate) fn check_grad_shapes(io: AttentionGradInputs, same_seqlen: bool) {
        let (q_ref, k_ref, v_ref, o_ref, dy_ref, lse_ref) = (io.q_ref, io.k_ref, io.v_ref, io.o_ref, io.dy_ref, io.lse_ref);
        let q_shape = q_ref.shape();
        let [b, n, dh, sl] = q_shape;
        let k_shape = k_ref.shape();
        let v_shape = v_ref.shape();
        let o_shape = o_ref.shape();
        let dy_shape = dy_ref.shape();
        assert!(
            k_ref.ndim() == 4 && k_shape[0] == b && k_shape[2] == dh && (!same_seqlen || k_shape[3] == sl),
            "k_ref must be [B, N_kv, D, S], q_ref is {q_shape}, got {k_shape}"
        );
        assert!(v_shape == k_shape, "v_ref must have k_ref's shape {k_shape} ([B, N_kv, D, S]), got {v_shape}");
        assert!(o_shape == q_shape, "o_ref must have q_ref's shape {q_shape} ([B, N, D, S]), got {o_shape}");
        assert!(dy_shape == q_shape, "dy_ref must have q_ref's shape {q_shape} ([B, N, D, S]), got {dy_shape}");
        let lse_shape = lse_ref.shape();
        let n_grp = sl / P_MAX;
        assert!(
            lse_ref.ndim() == 4 && lse_shape[0] == b && lse_shape[1] == n && lse_shape[2] == P_MAX && lse_shape[3] == n_grp,
            "lse_ref must be [B, N, 128, S / 128] = [{b}, {n}, 128, {n_grp}], got {lse_shape}"
        );
        let kdt = q_ref.dtype();
        let (kt, vt, ot, dyt) = (k_ref.dtype(), v_ref.dtype(), o_ref.dtype(), dy_ref.dtype());
        assert!(
            kt == kdt && vt == kdt && ot == kdt && dyt == kdt,
            "q_ref, k_ref, v_ref, o_ref and dy_ref must share one dtype, got {kdt}, {kt}, {vt}, {ot}, {dyt}"
        );
    }

    /// Ring attention backward, a drop-in for the NKI library's
    /// `ring_attention_spmd_bwd` (2.30): the gradients dQ, dK and dV of
    /// `ring_attention_spmd_fwd` over a ring of `num_workers` ranks.
    ///
    /// Every input is `[B, N, D, S]` (head-dim major, `S` tokens per rank) except
    /// `lse_ref`, `[B, N, 128, S / 128]` (the forward's log-sum-exp of the scaled
    /// scores, row `128 g + p` at `[.., p, g]`); `o_ref` is the normalised forward
    /// output. Q is unscaled: `softmax_scale` (default `1/sqrt(D)`) is applied
    /// inside. Returns fp32 dQ, dK, dV, each `[B, N, D, S]`. With `mixed_precision`
    /// the accumulators, `-LSE` and `D` are fp32 (else the input dtype). `lnc_size`
    /// must equal the launch's LNC degree; `(b, h)` pairs are dealt to the programs
    /// round by round, and a program without a pair in the last round repeats pair
    /// `(0, 0)` into throwaway outputs so the collectives stay matched. Keyword
    /// arguments past the library's are the forward's features; `q_segment_ids` /
    /// `kv_segment_ids` are int32 `[B, S]` (both or neither); `bias` is float32
    /// `[B, N, S, num_workers·S]`, the forward's (its rows travel with Q).
    ///
    /// The kernel checks its inputs, gathers them in [`RingBwdAttnConfig`] and
    /// [`RingBwdTensors`], allocates the ring buffers ([`QueryBlock`], [`DqRing`])
    /// and runs [`ring_bwd_item`] per (batch, KV head) pair of its LNC program.
    #[nki_kernel]
    pub fn ring_attention_spmd_bwd(
        #[spread] fwd: AttentionGradInputs,
        #[default(false)] use_causal_mask: bool,
        #[default(true)] mixed_precision: bool,
        softmax_scale: Option<f64>,
        #[default(1)]
        #[range(>= 1)]
        num_workers: i64,
        #[default(1)]
        #[range(>= 1, <= 2)]
        lnc_size: i64,
        replica_groups: Option<Groups>,
        #[default(false)] striped_attention: bool,
        #[dtypes(float32)] sinks: Option<Hbm>,
        #[default(false)] zigzag_attention: bool,
        #[spread] _: RingWindow,
        #[spread] _: ScoreFeatures,
    ) -> Outputs {
        let ring: RingAttnFeatures = ring_features(
            replica_groups,
            num_workers,
            use_causal_mask,
            striped_attention,
            zigzag_attention,
            window_left,
            window_right,
            chunk_size,
            soft_cap,
            q_segment_ids.is_some(),
        );
        check_shapes(fwd);
        let [b, n, dh, sl] = q_ref.shape();
        let (q_shape, k_shape, n_kv, kdt) = (q_ref.shape(), k_ref.shape(), k_ref.shape()[1], q_ref.dtype());
        let (dts, dnt): (i64, i64) = head_tiles(dh);
        assert!(dh % dts == 0, HEAD_DIM_TILES);
        let lnc_n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let lnc_id = if nl::program_ndim() == 1 { nl::program_id(0) } else { 0 };
        assert!(lnc_size == lnc_n, "lnc_size is {lnc_size} but the kernel runs on {lnc_n} LNC program(s)");

        let scale: f64 = softmax_scale_of(softmax_scale, dh);
        // Masked scores are scaled in the exp: crate::scale::MIN_MASKED_SCALE keeps them masked.
        let masked = ring.causal || ring.bounded;
        assert!(!masked || scale >= 1e-30, CAUSAL_SCALE);
        check_feature_inputs(sinks, q_segment_ids, kv_segment_ids, bias, b, n, sl, num_workers);
        let biased = bias.is_some();
        let cfg: RingBwdAttnConfig = block_config(fwd, mixed_precision, ring, scale, lnc_size, lnc_id);
        let out_dq = nl::ndarray(q_shape, nl::float32, buffer = nl::shared_hbm);
        let out_dk = nl::ndarray(k_shape, nl::float32, buffer = nl::shared_hbm);
        let out_dv = nl::ndarray(k_shape, nl::float32, buffer = nl::shared_hbm);
        // Each (batch, query head)'s share of the sink gradient, summed over the batch at the end.
        let dsink_part = nl::ndarray([b, n], nl::float32, buffer = nl::shared_hbm);

        // Ring buffers, one slot per LNC program.
        let send: QueryBlock = allocate_query_block(cfg, biased);
        let recv: QueryBlock = allocate_query_block(cfg, biased);
        let dqr = DqRing {
            send: nl::ndarray([lnc_size, dh, sl], nl::float32, buffer = nl::shared_hbm),
            recv: nl::ndarray([lnc_size, dh, sl], nl::float32, buffer = nl::shared_hbm),
            scratch: nl::ndarray([lnc_size, dh, sl], nl::float32, buffer = nl::shared_hbm),
        };
        let tensors: RingTensors = ring_tensors(ring, q_segment_ids, kv_segment_ids, bias);
        let io = RingBwdTensors { fwd, sinks, ring: tensors };

        let pairs = b * n_kv;
        let rounds = (pairs + lnc_size - 1) / lnc_size;
        for round in 0..rounds {
            let item = round * lnc_size + lnc_id;
            // A program without a pair in the last round repeats pair (0, 0) into
            // private scratch, so that its collectives still match its partner's.
            let spare = item >= pairs;
            let pair = if spare { 0 } else { item };
            let grads = RingBwdGrads {
                dq: if spare { nl::ndarray(q_shape, nl::float32, buffer = nl::private_hbm) } else { out_dq },
                dk: if spare { nl::ndarray(k_shape, nl::float32, buffer = nl::private_hbm) } else { out_dk },
                dv: if spare { nl::ndarray(k_shape, nl::float32, buffer = nl::private_hbm) } else { out_dv },
                dsink_part: if spare { nl::ndarray([b, n], nl::float32, buffer = nl::private_hbm) } else { dsink_part },
            };
            ring_bwd_item(cfg, io, grads, send, recv, dqr, pair / n_kv, pair % n_kv);
        }
        if sinks.is_some() {
            return Outputs(out_dq, out_dk, out_dv, sum_sink_parts(dsink_part, lnc_size, lnc_id));
        }
        Outputs(out_dq, out_dk, out_dv)
    }
}
