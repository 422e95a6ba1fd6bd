//! `attention_cte`: the NKI library's prefill flash-attention kernel (2.30 feature
//! set), written in the DSL.
//!
//! Algorithm. The kernel validates its inputs ([`check_inputs`],
//! [`check_config`]), gathers the call's flags in an [`AttnConfig`] and its HBM
//! tensors in an [`AttnTensors`] bundle, and shards whole batches over the LNC
//! programs (an odd last batch split by query groups). Per batch,
//! [`attention_cte_impl`] sizes the tiles ([`compute_tile_parameters`]), allocates
//! the batch's buffers and range-select bounds ([`allocate_batch_buffers`],
//! [`setup_range_select_bounds`]), then:
//!
//! ```text
//! for each KV section of at most FLASH_ATTENTION_SECTION_LENGTH keys:
//!     load its K and V tiles                          (load_kv_impl)
//!     for each query group of Q_GRP_SZ rows that sees the section:
//!         load Q                                      (load_q_impl)
//!         QK per K_TILE_SZ keys into PSUM, soft cap,
//!         bias, segment ids, mask, tile max           (qk_and_max_impl)
//!         section max, running max, correction        (update_max_impl)
//!         exp(s - max) into bf16 P with fp32 row sums,
//!         P transposed so keys sit on partitions      (exp_impl)
//!         PV per LARGE_TILE_SZ keys in PSUM           (pv_impl)
//!         running sum, output corrected across
//!         sections through HBM, normalised last       (write_back_impl)
//! ```
//!
//! Query groups are processed one after another (the library pipelines them;
//! groups share no data, so the numerics are the same). Masking is static
//! (`affine_select`), dynamic (`range_select` against per-row bounds) or none.

use nki::prelude::*;

pub use flash::*;

/// The kernel with its tile constants, its state bundles and its phase helpers.
#[nki_module]
pub mod flash {
    use nki::prelude::*;

    /// SBUF and PSUM partitions: one column of per-row statistics spans them.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Query rows per group (the library's `_Q_GRP_SZ`): the partitions of one QK result.
    pub const Q_GRP_SZ: i64 = nl::tile_size::pmax;
    /// Keys per QK matmul, mask and exp instruction (`_K_TILE_SZ`): one 2 KiB PSUM bank of fp32.
    pub const K_TILE_SZ: i64 = nl::tile_size::psum_fmax;
    /// Keys per V tile and per PV matmul (`_V_TILE_SZ`): the contracted partitions.
    pub const V_TILE_SZ: i64 = nl::tile_size::pmax;
    /// Keys per PV accumulation in one PSUM tile (`_LARGE_TILE_SZ`, four K tiles).
    pub const LARGE_TILE_SZ: i64 = 2048;
    /// Above this many keys the KV sequence is split into sections (`_FLASH_ATTENTION_THRESHOLD`).
    pub const FLASH_ATTENTION_THRESHOLD: i64 = 10240;
    /// Keys per section when the sequence is split (`_FLASH_ATTENTION_SECTION_LENGTH`).
    pub const FLASH_ATTENTION_SECTION_LENGTH: i64 = 8192;
    /// The largest batch the library tests (`_MAX_BS`).
    pub const MAX_BS: i64 = 512;
    /// The longest query or key sequence, and the widest sliding window (`_MAX_SEQLEN`).
    pub const MAX_SEQLEN: i64 = 131072;
    /// The largest head dimension (`_MAX_HEAD_DIM`): it sits on the partitions of Q and K.
    pub const MAX_HEAD_DIM: i64 = nl::tile_size::pmax;
    /// The largest context-parallel degree (`_MAX_GLOBAL_CP_DEGREE`).
    pub const MAX_GLOBAL_CP_DEGREE: i64 = 32;
    /// From this many query rows an odd last batch is split between the LNC programs.
    pub const SEQLEN_SHARDING_THRESHOLD: i64 = 1024;
    /// The first program's share of a split batch's groups.
    pub const SEQLEN_SHARDING_SPLIT_FACTOR_DEFAULT: f64 = 0.5;
    /// The first program's share under a causal mask, whose first groups see fewer keys.
    pub const SEQLEN_SHARDING_SPLIT_FACTOR_CAUSAL: f64 = 0.65;

    /// The library's `AttnConfig`: the shapes and flags of one call.
    #[nki_object]
    pub struct AttnConfig {
        /// Query batch (batch × heads).
        pub bs: i64,
        /// Key/value batch; `bs` is a multiple of it (GQA).
        pub bs_kv: i64,
        /// Query rows per batch.
        pub seqlen_q: i64,
        /// Active keys per batch.
        pub seqlen_k_active: i64,
        /// Prefix-cache keys per batch (0 without prefix caching).
        pub seqlen_k_prior: i64,
        /// Head dimension.
        pub d: i64,
        /// `q` is `(bs, seqlen_q, d)` (else `(bs, d, seqlen_q)`).
        pub tp_q: bool,
        /// `k` is `(bs_kv, seqlen_kv, d)` (else `(bs_kv, d, seqlen_kv)`).
        pub tp_k: bool,
        /// The output is `(bs, d, seqlen_q)` (else `(bs, seqlen_q, d)`).
        pub tp_out: bool,
        /// `k_prior`, `v_prior` and `prior_used_len` are given.
        pub is_prefix_caching: bool,
        /// Mask keys after the query.
        pub causal_mask: bool,
        /// A sliding window is set.
        pub use_swa: bool,
        /// The sliding window in keys (0: off).
        pub sliding_window: i64,
        /// Context parallelism is on (`global_cp_deg` given).
        pub use_cp: bool,
        /// The context-parallel degree (1 without CP).
        pub global_cp_deg: i64,
        /// CP with row-strided Q.
        pub cp_strided_q_slicing: bool,
        /// CP with striped Q and K/V.
        pub cp_striped_input: bool,
        /// Multiplies `QKᵀ`.
        pub scale: f64,
        /// The dtype of matmul results in PSUM.
        pub mm_out_dtype: Dtype,
        /// `bound_min` and `bound_max` are given.
        pub is_sequence_packed: bool,
        /// Leave the output unnormalised (the raw row sum is cached).
        pub skip_output_normalization: bool,
        /// The soft cap `C` of `C·tanh(scale·s / C)` (0: off).
        pub soft_cap: f64,
        /// A sink logit per batch is given.
        pub has_sink: bool,
    }

    /// The call's HBM tensors: the inputs as given, the outputs as allocated.
    #[nki_object]
    pub struct AttnTensors {
        /// Queries.
        pub q: Tensor,
        /// Active keys.
        pub k: Tensor,
        /// Active values.
        pub v: Tensor,
        /// The output.
        pub o: Tensor,
        /// The cached negated row max (`cache_softmax`).
        pub out_neg_max: Option<Tensor>,
        /// The cached reciprocal (or raw) row sum (`cache_softmax`).
        pub out_sum_recip: Option<Tensor>,
        /// Prefix-cache keys.
        pub k_prior: Option<Tensor>,
        /// Prefix-cache values.
        pub v_prior: Option<Tensor>,
        /// The prefix-cache keys in use, `(1,)`.
        pub prior_used_len: Option<Tensor>,
        /// A sink logit per batch.
        pub sink: Option<Tensor>,
        /// The CP offset of the local queries, `(1, 1)`.
        pub cp_offset: Option<Tensor>,
        /// The first key each query sees (sequence packing).
        pub bound_min: Option<Tensor>,
        /// The last key each query sees (sequence packing).
        pub bound_max: Option<Tensor>,
        /// Query segment ids.
        pub q_segment_ids: Option<Tensor>,
        /// Key segment ids.
        pub kv_segment_ids: Option<Tensor>,
        /// A float32 bias added to the logits.
        pub bias: Option<Tensor>,
    }

    /// The library's `AttnTileParams`: tile counts and masking choices derived from the config.
    #[nki_object]
    pub struct AttnTileParams {
        /// Query groups per batch.
        pub num_grps: i64,
        /// Whether compute is skipped past the causal diagonal (off for contiguous CP,
        /// whose bounds do the masking).
        pub is_causal: bool,
        /// Mask with `range_select` against per-row bounds rather than `affine_select`.
        pub dynamic_sel_mask: bool,
        /// CP with SWA: only the window of keys the local queries see is loaded,
        /// from a run-time offset.
        pub windowed_kv: bool,
        /// Active keys loaded (the window with `windowed_kv`).
        pub seqlen_k_active_updated: i64,
        /// Prior keys padded to a multiple of `K_TILE_SZ`.
        pub seqlen_k_prior_padded: i64,
        /// Padded prior plus active keys.
        pub seqlen_kv_total: i64,
        /// Keys per section.
        pub section_len: i64,
        /// Sections.
        pub num_sections: i64,
        /// K tiles per section.
        pub num_k_tiles_per_section: i64,
        /// V tiles per section.
        pub num_v_tiles_per_section: i64,
        /// PV accumulation tiles per section.
        pub num_large_tiles_per_section: i64,
        /// One statistics column for the sink, 0 without it.
        pub sink_cols: i64,
    }

    /// The library's `AttnInternalBuffers` of one batch: what every section and group of it reads.
    #[nki_object]
    pub struct AttnInternalBuffers {
        /// The query batch.
        pub batch_id: i64,
        /// Its KV batch.
        pub batch_id_kv: i64,
        /// Its row of `kv_segment_ids`.
        pub kv_segment_row: i64,
        /// Zeros, `(P_MAX, 1)`: the bias of a plain activation.
        pub zero_bias: Tensor,
        /// The sink logit on every partition.
        pub sink_sb: Tensor,
        /// Lower range-select bound per query row (column g, partition p: row `Q_GRP_SZ g + p`).
        pub range_sel_lbs: Tensor,
        /// Upper range-select bound per query row.
        pub range_sel_ubs: Tensor,
        /// Lower bound for prior keys.
        pub range_sel_lbs_prior: Tensor,
        /// Upper bound for prior keys.
        pub range_sel_ubs_prior: Tensor,
        /// The run-time key offset (`(1, 1)` uint32) of a windowed KV load.
        pub k_offset: Option<Tensor>,
        /// Query segment ids in fp32, one column per group.
        pub q_ids: Option<Tensor>,
        /// Running negated max per group (persistent across sections).
        pub mm1_running_max: Tensor,
        /// Running row sum per group.
        pub exp_running_sum: Tensor,
        /// Reciprocal row sum per group, set on the group's last section.
        pub exp_sum_reciprocal: Tensor,
    }

    /// The library's `SectionParams`, with the section's K, V and key-id tiles.
    #[nki_object]
    pub struct SectionParams {
        /// Index of the section.
        pub section_idx: i64,
        /// First key of the section in the `[padded prior ++ active]` sequence.
        pub section_offset: i64,
        /// The section's first key among the active keys (or the prior ones).
        pub section_offset_active: i64,
        /// The same for the next section.
        pub next_section_offset_active: i64,
        /// Whether the section starts in the prefix cache.
        pub section_contains_prefix: bool,
        /// Whether the next section starts in the prefix cache.
        pub next_section_contains_prefix: bool,
        /// K, `(d, num_k_tiles · K_TILE_SZ)` bf16.
        pub k_sb: Tensor,
        /// V, `(V_TILE_SZ, num_v_tiles, d)` bf16.
        pub v_sb: Tensor,
        /// Key segment ids on every partition.
        pub k_ids: Option<Tensor>,
    }

    /// One query group within one section: its rows and tiles.
    #[nki_object]
    pub struct GroupBuffers {
        /// The query batch.
        pub batch_id: i64,
        /// The group.
        pub grp: i64,
        /// Its first query row.
        pub q0: i64,
        /// Its rows (fewer than `Q_GRP_SZ` in a partial last group).
        pub rows: i64,
        /// Whether this is the last section the group sees (normalise then).
        pub last_section: bool,
        /// Q, `(d, Q_GRP_SZ)` bf16.
        pub q_sb: Tensor,
        /// The max of each K tile (and the sink).
        pub mm1_partial_max: Tensor,
        /// Scaled, masked scores of the section.
        pub mm1_masked: Tensor,
        /// `exp(max_old - max_new)`, the correction of earlier sections.
        pub flash_attn_correction_factor: Tensor,
        /// Row sums of each K tile's probabilities (and the sink's).
        pub exp_partial_sum: Tensor,
        /// Probabilities in bf16.
        pub exp_sb: Tensor,
        /// Probabilities transposed: keys on partitions.
        pub exp_tp_sb: Tensor,
        /// The section's PV.
        pub mm2_sb: Tensor,
    }

    /// A KV tile of the section's `[padded prior ++ active]` sequence.
    #[nki_object]
    pub struct KvTile {
        /// Whether it lies in the prefix cache.
        pub in_prior: bool,
        /// Its first key in the prefix cache or among the active keys.
        pub k0: i64,
        /// How many keys it holds (0 past the end).
        pub keys: i64,
    }

    /// Whether any query of group `g` (or of `n` groups from `g`) may see key `k0`
    /// under the causal mask; strided CP uses the worst-case rank.
    #[nki_helper]
    fn has_any_compute_causal(ac: AttnConfig, g: i64, k0: i64, n: i64) -> bool {
        let cp_deg = ac.global_cp_deg;
        let last_q = Q_GRP_SZ * g + Q_GRP_SZ * n - 1;
        let max_q = if ac.cp_strided_q_slicing { last_q * cp_deg + cp_deg - 1 } else { last_q };
        max_q >= k0
    }

    /// Whether group `g` may see a key of `[k0, k0 + tile)` inside its sliding window;
    /// strided CP uses the best-case rank.
    #[nki_helper]
    fn has_any_compute_swa(ac: AttnConfig, g: i64, k0: i64, tile: i64) -> bool {
        let min_q = if ac.cp_strided_q_slicing { Q_GRP_SZ * g * ac.global_cp_deg } else { Q_GRP_SZ * g };
        min_q < k0 + tile - 1 + ac.sliding_window
    }

    /// Whether KV tile `t` of `size` keys holds a key group `g` may see: prior tiles
    /// always, active ones unless causal compute skipping rules them out.
    #[nki_helper]
    fn has_compute(ac: AttnConfig, atp: AttnTileParams, g: i64, t: KvTile, size: i64) -> bool {
        let k0 = t.k0;
        let sees = has_any_compute_causal(ac, g, k0, 1) && (ac.sliding_window == 0 || has_any_compute_swa(ac, g, k0, size));
        t.in_prior || !atp.is_causal || sees
    }

    /// The KV tile of `size` keys at position `x` of the section's `[padded prior ++ active]` sequence.
    #[nki_helper]
    fn kv_tile(ac: AttnConfig, atp: AttnTileParams, x: i64, size: i64) -> KvTile {
        let s_pp = atp.seqlen_k_prior_padded;
        let in_prior = ac.is_prefix_caching && x < s_pp;
        let k0 = if in_prior { x } else { x - s_pp };
        let part_len = if in_prior { ac.seqlen_k_prior } else { atp.seqlen_k_active_updated };
        let keys = if k0 < part_len && x < atp.seqlen_kv_total { (part_len - k0).min(size) } else { 0 };
        KvTile { in_prior, k0, keys }
    }

    /// Copies partition 0 of the `(P_MAX, n)` tile `t` to all partitions, one
    /// 32-partition quadrant at a time.
    #[nki_helper]
    fn broadcast_partition0(t: Sbuf) {
        for quad in 0..P_MAX / 32 {
            nisa::nc_stream_shuffle(t[s![quad * 32..(quad + 1) * 32, ..]], t[s![0..1, ..]], [0; 32]);
        }
    }

    /// A `(P_MAX, 1)` fp32 column holding element `[0, 0]` of the HBM view `src` on every partition.
    #[nki_helper]
    pub(crate) fn scalar_column(src: Hbm) -> Sbuf {
        let col = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(col[s![0..1, 0..1]], src);
        broadcast_partition0(col);
        col
    }

    /// Segment ids as a mask: `dst` (`[rows, cols]`, fp32) becomes `src·scale` where
    /// the key's id equals the query's and the FLOAT32_MIN sentinel elsewhere, as
    /// `s·eq + (eq - 1)·FLOAT32_MAX` (exact in both cases). Key column `c` of `dst`
    /// reads column `k0 + c` of `k_ids` (the keys' ids, the same on every partition);
    /// row `p` reads `q_ids[p, g]`. Without ids (unsegmented) `dst` is left alone.
    /// `attention_cte`'s scores and the ring backward's are masked with it.
    #[nki_helper]
    pub(crate) fn mask_segments(dst: Tensor, src: Tensor, scale: f64, k_ids: Option<Tensor>, k0: i64, q_ids: Option<Tensor>, g: i64) {
        let [rows, cols] = dst.shape();
        if let Some(ki) = k_ids {
            if let Some(qi) = q_ids {
                let same = nl::ndarray([rows, cols], nl::float32, buffer = nl::sbuf);
                nisa::tensor_scalar(same, ki[s![0..rows, k0..k0 + cols]], nl::equal, qi[s![0..rows, g..g + 1]]);
                nisa::scalar_tensor_tensor(dst, src, nl::multiply, scale, nl::multiply, same);
                nisa::tensor_scalar(same, same, nl::subtract, 1.0, op1 = nl::multiply, operand1 = f32::MAX);
                nisa::tensor_tensor(dst, dst, same, nl::add);
            }
        }
    }

    /// The query groups `[start, end)` of the odd last batch that LNC program `shard`
    /// computes: from `SEQLEN_SHARDING_THRESHOLD` rows program 0 takes the first
    /// `frac` of the groups and program 1 the rest; below that program 0 takes them all.
    #[nki_helper]
    pub(crate) fn remainder_groups(shard: i64, s_q: i64, groups: i64, frac: f64) -> (i64, i64) {
        let first = ((groups as f64) * frac) as i64;
        let split = s_q >= SEQLEN_SHARDING_THRESHOLD;
        let start = if split && shard != 0 { first } else { 0 };
        let end = if !split && shard != 0 {
            0
        } else if split && shard == 0 {
            first
        } else {
            groups
        };
        (start, end)
    }

    /// DMA-transposes `rows` rows of `d` elements, starting at element `start` of the
    /// HBM tensor `src`, into columns `[c0, c0 + rows)` of the `(d, width)` bf16 tile
    /// `dst`, in the library's 4-d form `(rows, 1, 1, d) -> (d, 1, 1, rows)`. A source
    /// of another dtype goes through a tile of its own dtype (the transpose does not cast).
    #[nki_helper]
    fn transpose_rows(dst: Sbuf, c0: i64, src: Hbm, start: i64, rows: i64) {
        let [d, width] = dst.shape();
        let rows_in = src.ap([[d, rows], [1, 1], [1, 1], [1, d]], offset = start);
        if src.dtype() == nl::bfloat16 {
            nisa::dma_transpose(dst.ap([[width, d], [1, 1], [1, 1], [1, rows]], offset = c0), rows_in);
        } else {
            let staged = nl::ndarray([d, rows], src.dtype(), buffer = nl::sbuf);
            nisa::dma_transpose(staged.ap([[rows, d], [1, 1], [1, 1], [1, rows]], offset = 0), rows_in);
            nisa::tensor_copy(dst[s![.., c0..c0 + rows]], staged);
        }
    }

    /// Loads `cols` keys from `k0` of KV batch `kvb` of `src` (`(bs_kv, d, L)`, or
    /// `(bs_kv, L, d)` with `tp_k`) into columns `[c0, c0 + cols)` of the bf16 tile
    /// `k_sec`. With `offset_reg` (a `(1, 1)` uint32 tile) the keys start `k_off` later,
    /// a run-time offset.
    #[nki_helper]
    fn load_k_tile(k_sec: Sbuf, c0: i64, src: Hbm, kvb: i64, k0: i64, cols: i64, tp_k: bool, offset_reg: Option<Sbuf>) {
        let [_nb, a, bdim] = src.shape();
        let d = if tp_k { bdim } else { a };
        let length = if tp_k { a } else { bdim };
        if let Some(k_off) = offset_reg {
            let ind = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
            if !tp_k {
                nisa::tensor_scalar(ind, k_off, nl::add, k0);
                let view = src.ap([[length, d], [1, cols]], offset = kvb * d * length, scalar_offset = ind, indirect_dim = 2);
                nisa::dma_copy(k_sec[s![.., c0..c0 + cols]], view);
            } else {
                for t in 0..K_TILE_SZ / P_MAX {
                    let rows = (cols - P_MAX * t).min(P_MAX);
                    if rows > 0 {
                        nisa::tensor_scalar(ind, k_off, nl::add, k0 + P_MAX * t);
                        let loaded = nl::ndarray([P_MAX, d], nl::bfloat16, buffer = nl::sbuf);
                        let view = src.ap([[d, rows], [1, d]], offset = kvb * length * d, scalar_offset = ind, indirect_dim = 1);
                        nisa::dma_copy(loaded[s![0..rows, ..]], view);
                        let flipped = nl::ndarray([d, P_MAX], nl::bfloat16, buffer = nl::psum);
                        nisa::nc_transpose(flipped[s![.., 0..rows]], loaded[s![0..rows, ..]]);
                        let c = c0 + P_MAX * t;
                        nisa::tensor_copy(k_sec[s![.., c..c + rows]], flipped[s![.., 0..rows]]);
                    }
                }
            }
        } else if tp_k {
            transpose_rows(k_sec, c0, src, (kvb * length + k0) * d, cols);
        } else {
            nisa::dma_copy(k_sec[s![.., c0..c0 + cols]], src[s![kvb, .., k0..k0 + cols]]);
        }
    }

    /// Loads `rows` values from key `k0` of KV batch `kvb` of `src` (`(bs_kv, L, d)`)
    /// into V tile `t` of `v_sec` (`(V_TILE_SZ, tiles, d)` bf16), at a run-time offset with `offset_reg`.
    #[nki_helper]
    fn load_v_tile(v_sec: Sbuf, t: i64, src: Hbm, kvb: i64, k0: i64, rows: i64, offset_reg: Option<Sbuf>) {
        let [_nb, length, d] = src.shape();
        if let Some(k_off) = offset_reg {
            let ind = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
            nisa::tensor_scalar(ind, k_off, nl::add, k0);
            let view = src.ap([[d, rows], [1, d]], offset = kvb * length * d, scalar_offset = ind, indirect_dim = 1);
            nisa::dma_copy(v_sec[s![0..rows, t, ..]], view);
        } else {
            nisa::dma_copy(v_sec[s![0..rows, t, ..]], src[s![kvb, k0..k0 + rows, ..]]);
        }
    }

    /// Loads the per-query bounds of batch `b` from the `(bs, s_q, 1)` HBM tensor
    /// `src` into the `(P_MAX, groups)` tile `dst` (row `Q_GRP_SZ g + p` at `[p, g]`): the
    /// full groups with one access pattern, the rows of a partial last group on
    /// their own, so no read passes the batch's `s_q` rows. The partial group's
    /// other partitions, rows of no query, are set to 0: the bounds are combined
    /// a whole tile at a time (`minimum` with the upper bounds), which reads them.
    #[nki_helper]
    fn load_row_bounds(dst: Sbuf, src: Hbm, b: i64, s_q: i64) {
        let full = s_q / Q_GRP_SZ;
        let tail = s_q % Q_GRP_SZ;
        if full > 0 {
            nisa::dma_copy(dst[s![.., 0..full]], src.ap([[1, Q_GRP_SZ], [Q_GRP_SZ, full]], offset = b * s_q));
        }
        if tail > 0 {
            nisa::memset(dst[s![tail..Q_GRP_SZ, full..full + 1]], 0.0);
            nisa::dma_copy(dst[s![0..tail, full..full + 1]], src.ap([[1, tail], [1, 1]], offset = b * s_q + Q_GRP_SZ * full));
        }
    }

    /// The sequence length of a K tensor (`(bs, d, L)`, or `(bs, L, d)` with `tp_k`); 0 when absent.
    #[nki_helper]
    fn kv_len(t: Option<Hbm>, tp_k: bool) -> i64 {
        let mut n = 0;
        if let Some(x) = t {
            n = if tp_k { x.shape()[1] } else { x.shape()[2] };
        }
        n
    }

    /// The library's `_compute_tile_parameters`: which masking path the call takes,
    /// the keys loaded and the section and tile counts.
    #[nki_helper]
    fn compute_tile_parameters(ac: AttnConfig) -> AttnTileParams {
        let (s_q, s_k, sw) = (ac.seqlen_q, ac.seqlen_k_active, ac.sliding_window);
        let (use_cp, strided, striped) = (ac.use_cp, ac.cp_strided_q_slicing, ac.cp_striped_input);
        let contiguous_cp = use_cp && !strided && !striped;
        let is_causal = if striped {
            true
        } else if contiguous_cp {
            false
        } else {
            ac.causal_mask
        };
        let dynamic = use_cp || ac.is_sequence_packed || striped || (ac.use_swa && !contiguous_cp && sw <= Q_GRP_SZ);
        // range_select applies no scale (sequence packing reaches it without the scale rule).
        assert!(!dynamic || ac.scale == 1.0, "range_select path doesn't support scale != 1.0");
        // With CP + SWA only the keys the local queries can see are loaded: a window
        // of s_ka keys starting at the run-time offset k_off.
        let window = ac.use_swa && use_cp && !strided;
        let s_ka = if window { (((s_q + sw - 1).min(s_k) + K_TILE_SZ - 1) / K_TILE_SZ * K_TILE_SZ).min(s_k) } else { s_k };
        let s_pp = (ac.seqlen_k_prior + K_TILE_SZ - 1) / K_TILE_SZ * K_TILE_SZ;
        let total = s_pp + s_ka;
        let section_len = if total > FLASH_ATTENTION_THRESHOLD { FLASH_ATTENTION_SECTION_LENGTH } else { total };
        AttnTileParams {
            num_grps: (s_q + Q_GRP_SZ - 1) / Q_GRP_SZ,
            is_causal,
            dynamic_sel_mask: dynamic,
            windowed_kv: window,
            seqlen_k_active_updated: s_ka,
            seqlen_k_prior_padded: s_pp,
            seqlen_kv_total: total,
            section_len,
            num_sections: (total + section_len - 1) / section_len,
            num_k_tiles_per_section: (section_len + K_TILE_SZ - 1) / K_TILE_SZ,
            num_v_tiles_per_section: (section_len + V_TILE_SZ - 1) / V_TILE_SZ,
            num_large_tiles_per_section: (section_len + LARGE_TILE_SZ - 1) / LARGE_TILE_SZ,
            sink_cols: if ac.has_sink { 1 } else { 0 },
        }
    }

    /// The buffers of batch `b` (the library's `_allocate_attention_buffers` for
    /// what outlives a section): the sink, the query segment ids, the range-select
    /// bounds ([`setup_range_select_bounds`]) and the running statistics.
    #[nki_helper]
    fn allocate_batch_buffers(ac: AttnConfig, atp: AttnTileParams, io: AttnTensors, b: i64) -> AttnInternalBuffers {
        let groups = atp.num_grps;
        let kvb = b / (ac.bs / ac.bs_kv);
        // Segment ids in fp32: column g, partition p is local query row Q_GRP_SZ g + p.
        let q_ids = if io.q_segment_ids.is_some() { Some(nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf)) } else { None };
        if let Some(qs) = io.q_segment_ids {
            if let Some(qi) = q_ids {
                load_row_bounds(qi, qs, b / (ac.bs / qs.shape()[0]), ac.seqlen_q);
            }
        }
        let mut kv_row = 0;
        if let Some(ks) = io.kv_segment_ids {
            kv_row = kvb / (ac.bs_kv / ks.shape()[0]);
        }
        let zero_bias = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(zero_bias, 0.0);
        let sink_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        if let Some(sk) = io.sink {
            nisa::dma_copy(sink_sb[s![0..1, 0..1]], sk[s![b..b + 1, 0..1]]);
            broadcast_partition0(sink_sb);
        }
        let k_off_reg = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
        let bufs = AttnInternalBuffers {
            batch_id: b,
            batch_id_kv: kvb,
            kv_segment_row: kv_row,
            zero_bias,
            sink_sb,
            range_sel_lbs: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
            range_sel_ubs: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
            range_sel_lbs_prior: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
            range_sel_ubs_prior: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
            k_offset: if atp.windowed_kv { Some(k_off_reg) } else { None },
            q_ids,
            mm1_running_max: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
            exp_running_sum: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
            exp_sum_reciprocal: nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf),
        };
        setup_range_select_bounds(ac, atp, bufs, io, k_off_reg);
        bufs
    }

    /// The library's `_setup_range_select_bounds`: the first and last key each query
    /// row sees, for `range_select` (CP, SWA, sequence packing) and for prior keys
    /// (prefix caching); with a windowed KV load, also the run-time key offset `k_off_reg`.
    #[nki_helper]
    fn setup_range_select_bounds(ac: AttnConfig, atp: AttnTileParams, bufs: AttnInternalBuffers, io: AttnTensors, k_off_reg: Sbuf) {
        let (groups, sw, cp_deg) = (atp.num_grps, ac.sliding_window, ac.global_cp_deg);
        let (lbs, ubs, lbs_prior, ubs_prior) = (bufs.range_sel_lbs, bufs.range_sel_ubs, bufs.range_sel_lbs_prior, bufs.range_sel_ubs_prior);
        let (dynamic, packed, use_cp) = (atp.dynamic_sel_mask, ac.is_sequence_packed, ac.use_cp);
        nisa::memset(lbs, 0.0);
        nisa::memset(lbs_prior, 0.0);
        if dynamic {
            if use_cp && ac.cp_strided_q_slicing {
                nisa::iota(ubs, [[cp_deg * Q_GRP_SZ, groups]], channel_multiplier = cp_deg);
            } else if packed && !atp.is_causal {
                nisa::iota(ubs, [[Q_GRP_SZ, groups]], offset = ac.seqlen_k_active);
            } else {
                nisa::iota(ubs, [[Q_GRP_SZ, groups]], channel_multiplier = 1);
            }
        }
        let cp_col = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        if use_cp {
            if let Some(cpo) = io.cp_offset {
                let loaded = scalar_column(cpo[s![0..1, 0..1]]);
                nisa::tensor_copy(cp_col, loaded);
            }
            if dynamic {
                nisa::tensor_scalar(ubs, ubs, nl::add, cp_col);
            }
        }
        if packed {
            if let Some(bmin) = io.bound_min {
                load_row_bounds(lbs, bmin, bufs.batch_id, ac.seqlen_q);
            }
            if let Some(bmax) = io.bound_max {
                let upper = nl::ndarray([P_MAX, groups], nl::float32, buffer = nl::sbuf);
                load_row_bounds(upper, bmax, bufs.batch_id, ac.seqlen_q);
                nisa::tensor_tensor(ubs, ubs, upper, nl::minimum);
            }
        }
        if ac.use_swa && dynamic {
            if packed {
                nisa::scalar_tensor_tensor(lbs, ubs, nl::subtract, (sw - 1) as f64, nl::maximum, lbs);
            } else {
                nisa::tensor_scalar(lbs, ubs, nl::add, -((sw - 1) as f64));
            }
        }
        let pul_col = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        if let Some(pul) = io.prior_used_len {
            let loaded_len = scalar_column(pul.ap([[1, 1], [1, 1]], offset = 0));
            nisa::tensor_copy(pul_col, loaded_len);
            nisa::tensor_scalar(ubs_prior, bufs.zero_bias.ap([[1, P_MAX], [0, groups]], offset = 0), nl::add, pul_col);
            if ac.use_swa {
                if dynamic {
                    nisa::tensor_scalar(lbs_prior, lbs, nl::add, pul_col);
                } else {
                    nisa::iota(lbs_prior, [[Q_GRP_SZ, groups]], channel_multiplier = 1);
                    nisa::tensor_scalar(lbs_prior, lbs_prior, nl::add, pul_col, op1 = nl::add, operand1 = -((sw - 1) as f64));
                }
            }
        }
        if atp.windowed_kv {
            let k_off = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
            let skipped = atp.seqlen_k_active_updated - ac.seqlen_q;
            nisa::tensor_scalar(k_off, cp_col, nl::add, -(skipped as f64), op1 = nl::maximum, operand1 = 0.0);
            nisa::tensor_copy(k_off_reg, k_off[s![0..1, 0..1]]);
            nisa::tensor_scalar(lbs, lbs, nl::subtract, k_off);
            nisa::tensor_scalar(ubs, ubs, nl::subtract, k_off);
        }
    }

    /// The library's `_compute_section_offset_active`: section offset `x` among the
    /// active keys (or the prior ones) and whether it lies in the prefix cache.
    #[nki_helper]
    fn compute_section_offset_active(ac: AttnConfig, atp: AttnTileParams, x: i64) -> (i64, bool) {
        let contains_prefix = ac.is_prefix_caching && x < atp.seqlen_k_prior_padded;
        let active = if contains_prefix { x } else { x - atp.seqlen_k_prior_padded };
        (active, contains_prefix)
    }

    /// Section `sec`'s parameters and its freshly allocated K, V and key-id tiles.
    #[nki_helper]
    fn section_params(ac: AttnConfig, atp: AttnTileParams, io: AttnTensors, sec: i64) -> SectionParams {
        let section_offset = sec * atp.section_len;
        let (section_offset_active, section_contains_prefix): (i64, bool) = compute_section_offset_active(ac, atp, section_offset);
        let (next_section_offset_active, next_section_contains_prefix): (i64, bool) =
            compute_section_offset_active(ac, atp, section_offset + atp.section_len);
        let width = atp.num_k_tiles_per_section * K_TILE_SZ;
        let segmented = io.q_segment_ids.is_some();
        SectionParams {
            section_idx: sec,
            section_offset,
            section_offset_active,
            next_section_offset_active,
            section_contains_prefix,
            next_section_contains_prefix,
            k_sb: nl::ndarray([ac.d, width], nl::bfloat16, buffer = nl::sbuf),
            v_sb: nl::ndarray([V_TILE_SZ, atp.num_v_tiles_per_section, ac.d], nl::bfloat16, buffer = nl::sbuf),
            k_ids: if segmented { Some(nl::ndarray([P_MAX, width], nl::float32, buffer = nl::sbuf)) } else { None },
        }
    }

    /// Where a K or V tile `t` comes from: nothing for an empty tile, the prefix
    /// cache `prior` for a prior tile (nothing without one), else `active`.
    #[nki_helper]
    fn tile_source(t: KvTile, prior: Option<Hbm>, active: Hbm) -> Option<Hbm> {
        if t.keys > 0 { if t.in_prior { prior } else { Some(active) } } else { None }
    }

    /// The library's `_load_k_tile` and `_load_v_tile`: the section's keys with their
    /// segment ids, and its values (prior or active; active ones at the run-time
    /// offset of a windowed load).
    #[nki_helper]
    fn load_kv_impl(ac: AttnConfig, atp: AttnTileParams, bufs: AttnInternalBuffers, io: AttnTensors, sp: SectionParams) {
        let kvb = bufs.batch_id_kv;
        let (kv_segment_ids, k_ids) = (io.kv_segment_ids, sp.k_ids);
        for kt in 0..atp.num_k_tiles_per_section {
            let c0 = K_TILE_SZ * kt;
            let t: KvTile = kv_tile(ac, atp, sp.section_offset + c0, K_TILE_SZ);
            let offset: Option<Sbuf> = if t.in_prior { None } else { bufs.k_offset };
            let src: Option<Hbm> = tile_source(t, io.k_prior, io.k);
            if let Some(kh) = src {
                load_k_tile(sp.k_sb, c0, kh, kvb, t.k0, t.keys, ac.tp_k, offset);
            }
            // The tile's key segment ids, the same on every partition.
            if t.keys > 0 {
                if let Some(ks) = kv_segment_ids {
                    if let Some(ki) = k_ids {
                        let ids = ks.ap([[0, P_MAX], [1, t.keys]], offset = bufs.kv_segment_row * ac.seqlen_k_active + t.k0);
                        nisa::dma_copy(ki[s![.., c0..c0 + t.keys]], ids);
                    }
                }
            }
        }
        for vt in 0..atp.num_v_tiles_per_section {
            let t: KvTile = kv_tile(ac, atp, sp.section_offset + V_TILE_SZ * vt, V_TILE_SZ);
            let offset: Option<Sbuf> = if t.in_prior { None } else { bufs.k_offset };
            let src: Option<Hbm> = tile_source(t, io.v_prior, io.v);
            if let Some(vh) = src {
                load_v_tile(sp.v_sb, vt, vh, kvb, t.k0, t.keys, offset);
            }
        }
    }

    /// Group `g`'s place in section `sp`: whether it sees any key of it, and whether
    /// this is the last section it sees.
    #[nki_helper]
    fn group_in_section(ac: AttnConfig, atp: AttnTileParams, sp: SectionParams, g: i64) -> (bool, bool) {
        let causal = atp.is_causal;
        let group_on = !causal || sp.section_contains_prefix || has_any_compute_causal(ac, g, sp.section_offset_active, 1);
        let next_on = sp.section_idx + 1 < atp.num_sections
            && (!causal || sp.next_section_contains_prefix || has_any_compute_causal(ac, g, sp.next_section_offset_active, 1));
        (group_on, sp.section_idx + 1 == atp.num_sections || !next_on)
    }

    /// The tiles of group `g` of batch `b` in one section.
    #[nki_helper]
    fn allocate_group_buffers(ac: AttnConfig, atp: AttnTileParams, b: i64, g: i64, last_section: bool) -> GroupBuffers {
        let q0 = Q_GRP_SZ * g;
        let stat_cols = atp.num_k_tiles_per_section + atp.sink_cols;
        let width = atp.num_k_tiles_per_section * K_TILE_SZ;
        let pv_shape = if ac.tp_out { [ac.d, Q_GRP_SZ] } else { [Q_GRP_SZ, ac.d] };
        GroupBuffers {
            batch_id: b,
            grp: g,
            q0,
            rows: (ac.seqlen_q - q0).min(Q_GRP_SZ),
            last_section,
            q_sb: nl::ndarray([ac.d, Q_GRP_SZ], nl::bfloat16, buffer = nl::sbuf),
            mm1_partial_max: nl::ndarray([P_MAX, stat_cols], nl::float32, buffer = nl::sbuf),
            mm1_masked: nl::ndarray([P_MAX, width], nl::float32, buffer = nl::sbuf),
            flash_attn_correction_factor: nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf),
            exp_partial_sum: nl::ndarray([P_MAX, stat_cols], nl::float32, buffer = nl::sbuf),
            exp_sb: nl::ndarray([P_MAX, width], nl::bfloat16, buffer = nl::sbuf),
            exp_tp_sb: nl::ndarray([P_MAX, width], nl::bfloat16, buffer = nl::sbuf),
            mm2_sb: nl::ndarray(pv_shape, ac.mm_out_dtype, buffer = nl::sbuf),
        }
    }

    /// The library's `_load_q_impl`: the group's query rows as a `(d, Q_GRP_SZ)` bf16 tile.
    #[nki_helper]
    fn load_q_impl(ac: AttnConfig, io: AttnTensors, grp: GroupBuffers) {
        let (b, q0, rows) = (grp.batch_id, grp.q0, grp.rows);
        if ac.tp_q {
            transpose_rows(grp.q_sb, 0, io.q, (b * ac.seqlen_q + q0) * ac.d, rows);
        } else {
            nisa::dma_copy(grp.q_sb[s![.., 0..rows]], io.q[s![b, .., q0..q0 + rows]]);
        }
    }

    /// The library's `_qk_and_max_impl`: QK of the group against every K tile of the
    /// section it sees, the max of each tile into `mm1_partial_max`. Per tile: the
    /// scores into PSUM, then in order the soft cap (`cap·tanh(scale·s / cap)`), the
    /// bias and the segment ids, each pass writing the tile's slice of `mm1_masked`;
    /// [`mask_and_max`] applies what scale is left.
    #[nki_helper]
    fn qk_and_max_impl(
        ac: AttnConfig,
        atp: AttnTileParams,
        sp: SectionParams,
        bufs: AttnInternalBuffers,
        io: AttnTensors,
        grp: GroupBuffers,
    ) {
        let (rows, q0, g) = (grp.rows, grp.q0, grp.grp);
        let (cap, scale) = (ac.soft_cap, ac.scale);
        let segmented = io.q_segment_ids.is_some();
        let biased = io.bias.is_some();
        nisa::memset(grp.mm1_partial_max, f32::MIN);
        for kt in 0..atp.num_k_tiles_per_section {
            let t: KvTile = kv_tile(ac, atp, sp.section_offset + K_TILE_SZ * kt, K_TILE_SZ);
            if t.keys > 0 && has_compute(ac, atp, grp.grp, t, K_TILE_SZ) {
                let (cols, k0) = (t.keys, t.k0);
                let c0 = K_TILE_SZ * kt;
                let scores = nl::ndarray([Q_GRP_SZ, K_TILE_SZ], ac.mm_out_dtype, buffer = nl::psum);
                nisa::nc_matmul(scores[s![0..rows, 0..cols]], grp.q_sb[s![.., 0..rows]], sp.k_sb[s![.., c0..c0 + cols]]);
                let dst = grp.mm1_masked[s![0..rows, c0..c0 + cols]];
                // Soft cap: logits cap·tanh(scale·s / cap), capped before the masks.
                if cap > 0.0 {
                    nisa::activation(dst, nl::tanh, scores[s![0..rows, 0..cols]], scale = scale / cap);
                    nisa::tensor_scalar(dst, dst, nl::multiply, cap);
                }
                let uncapped = if cap > 0.0 { dst } else { scores[s![0..rows, 0..cols]] };
                let uncapped_scale = if cap > 0.0 { 1.0 } else { scale };
                // Bias: scaled (and capped) logits plus the bias tile, before the masks.
                if let Some(bi) = io.bias {
                    let bt = nl::ndarray([Q_GRP_SZ, K_TILE_SZ], nl::float32, buffer = nl::sbuf);
                    nisa::dma_copy(bt[s![0..rows, 0..cols]], bi[s![grp.batch_id, q0..q0 + rows, k0..k0 + cols]]);
                    nisa::scalar_tensor_tensor(dst, uncapped, nl::multiply, uncapped_scale, nl::add, bt[s![0..rows, 0..cols]]);
                }
                let capped = if biased { dst } else { uncapped };
                let cap_scale = if biased { 1.0 } else { uncapped_scale };
                // Segment ids: scaled logits where the ids match, FLOAT32_MIN elsewhere.
                mask_segments(dst, capped, cap_scale, sp.k_ids, c0, bufs.q_ids, g);
                let src = if segmented || biased { dst } else { capped };
                let tile_scale = if segmented || biased { 1.0 } else { cap_scale };
                mask_and_max(ac, atp, bufs, grp, kt, t, src, tile_scale);
            }
        }
    }

    /// Masks K tile `kt`'s logits `src` into `mm1_masked`, multiplied by `tile_scale`,
    /// and its max into column `kt` of `mm1_partial_max`: `range_select` against the
    /// row bounds (dynamic masks, prior keys), `affine_select` on the causal diagonal
    /// (and the window's edge), a plain scaled copy elsewhere.
    #[nki_helper]
    fn mask_and_max(
        ac: AttnConfig,
        atp: AttnTileParams,
        bufs: AttnInternalBuffers,
        grp: GroupBuffers,
        kt: i64,
        t: KvTile,
        src: Tensor,
        tile_scale: f64,
    ) {
        let (rows, cols, k0, q0, g) = (grp.rows, t.keys, t.k0, grp.q0, grp.grp);
        let c0 = K_TILE_SZ * kt;
        let dst = grp.mm1_masked[s![0..rows, c0..c0 + cols]];
        let tile_max = grp.mm1_partial_max[s![0..rows, kt]];
        let mm_dtype = ac.mm_out_dtype;
        if atp.dynamic_sel_mask || t.in_prior {
            let lower = if t.in_prior { bufs.range_sel_lbs_prior } else { bufs.range_sel_lbs };
            let upper = if t.in_prior { bufs.range_sel_ubs_prior } else { bufs.range_sel_ubs };
            let keep_upper = if t.in_prior || (ac.is_sequence_packed && !atp.is_causal) { nl::less } else { nl::less_equal };
            nisa::range_select(
                dst,
                src,
                nl::greater_equal,
                keep_upper,
                lower[s![0..rows, g]],
                upper[s![0..rows, g]],
                reduce_cmd = nisa::reduce_cmd::reset_reduce,
                reduce_res = tile_max,
                reduce_op = nl::maximum,
                range_start = k0,
                on_false_value = f32::MIN,
            );
        } else if atp.is_causal && (ac.use_swa || q0 < k0 + K_TILE_SZ) {
            let copied = nl::ndarray([Q_GRP_SZ, K_TILE_SZ], mm_dtype, buffer = nl::sbuf);
            nisa::tensor_copy(copied[s![0..rows, 0..cols]], src);
            let selected = nl::ndarray([Q_GRP_SZ, K_TILE_SZ], mm_dtype, buffer = nl::sbuf);
            let sel = selected[s![0..rows, 0..cols]];
            nisa::affine_select(sel, [[-1, cols]], 1, copied[s![0..rows, 0..cols]], f32::MIN, cmp_op = nl::greater_equal, offset = q0 - k0);
            if ac.use_swa {
                let edge = k0 + ac.sliding_window - 1 - q0;
                nisa::affine_select(sel, [[1, cols]], -1, sel, f32::MIN, cmp_op = nl::greater_equal, offset = edge);
            }
            nisa::tensor_scalar_reduce(dst, sel, nl::multiply, tile_scale, nl::maximum, reduce_res = tile_max);
        } else {
            nisa::tensor_scalar_reduce(dst, src, nl::multiply, tile_scale, nl::maximum, reduce_res = tile_max);
        }
    }

    /// The library's `_update_max_impl`: the section max (with the sink on the first
    /// section), the running max, and the correction `exp(max_old - max_new)` of
    /// earlier sections.
    #[nki_helper]
    fn update_max_impl(atp: AttnTileParams, sp: SectionParams, bufs: AttnInternalBuffers, grp: GroupBuffers) {
        let n_k = atp.num_k_tiles_per_section;
        let run_max = bufs.mm1_running_max[s![.., grp.grp]];
        let corr = grp.flash_attn_correction_factor;
        if atp.sink_cols > 0 && sp.section_idx == 0 {
            nisa::tensor_copy(grp.mm1_partial_max[s![.., n_k..n_k + 1]], bufs.sink_sb);
        }
        let sec_negmax = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(sec_negmax, nl::maximum, grp.mm1_partial_max, 1, negate = true);
        if sp.section_idx == 0 {
            nisa::tensor_copy(run_max, sec_negmax);
            nisa::memset(corr, 0.0);
        } else {
            let prev_max = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
            nisa::activation(prev_max, nl::copy, run_max, bias = bufs.zero_bias, scale = -1.0);
            nisa::tensor_tensor(run_max, run_max, sec_negmax, nl::minimum);
            nisa::activation(corr, nl::exp, prev_max, bias = run_max);
        }
    }

    /// The library's `_exp_impl`: `exp(s - max)` into bf16 probabilities with fp32 row
    /// sums per K tile (and the sink's term on the first section), the probabilities
    /// DMA-transposed so keys sit on partitions.
    #[nki_helper]
    fn exp_impl(ac: AttnConfig, atp: AttnTileParams, sp: SectionParams, bufs: AttnInternalBuffers, grp: GroupBuffers) {
        let (rows, g, n_k) = (grp.rows, grp.grp, atp.num_k_tiles_per_section);
        let width = n_k * K_TILE_SZ;
        let (probs, probs_t) = (grp.exp_sb, grp.exp_tp_sb);
        nisa::memset(grp.exp_partial_sum, 0.0);
        for kt in 0..n_k {
            let t: KvTile = kv_tile(ac, atp, sp.section_offset + K_TILE_SZ * kt, K_TILE_SZ);
            if t.keys > 0 && has_compute(ac, atp, g, t, K_TILE_SZ) {
                let (c0, cols) = (K_TILE_SZ * kt, t.keys);
                nisa::activation_reduce(
                    probs[s![0..rows, c0..c0 + cols]],
                    nl::exp,
                    grp.mm1_masked[s![0..rows, c0..c0 + cols]],
                    nl::add,
                    grp.exp_partial_sum[s![0..rows, kt]],
                    bias = bufs.mm1_running_max[s![0..rows, g]],
                );
                let full = cols / V_TILE_SZ;
                let rest = cols % V_TILE_SZ;
                if full > 0 {
                    nisa::dma_transpose(
                        probs_t.ap([[width, V_TILE_SZ], [1, 1], [V_TILE_SZ, full], [1, rows]], offset = c0),
                        probs.ap([[width, rows], [1, 1], [V_TILE_SZ, full], [1, V_TILE_SZ]], offset = c0),
                    );
                }
                if rest > 0 {
                    let c = c0 + V_TILE_SZ * full;
                    nisa::dma_transpose(
                        probs_t.ap([[width, rest], [1, 1], [V_TILE_SZ, 1], [1, rows]], offset = c),
                        probs.ap([[width, rows], [1, 1], [V_TILE_SZ, 1], [1, rest]], offset = c),
                    );
                }
            }
        }
        if atp.sink_cols > 0 && sp.section_idx == 0 {
            nisa::activation(grp.exp_partial_sum[s![.., n_k..n_k + 1]], nl::exp, bufs.sink_sb, bias = bufs.mm1_running_max[s![.., g]]);
        }
    }

    /// The library's `_pv_impl`: PV into `mm2_sb`, accumulated in PSUM per
    /// `LARGE_TILE_SZ` keys and added up across large tiles.
    #[nki_helper]
    fn pv_impl(ac: AttnConfig, atp: AttnTileParams, sp: SectionParams, grp: GroupBuffers) {
        let (rows, pv) = (grp.rows, grp.mm2_sb);
        let pv_shape = if ac.tp_out { [ac.d, Q_GRP_SZ] } else { [Q_GRP_SZ, ac.d] };
        let v_per_large = LARGE_TILE_SZ / V_TILE_SZ;
        nisa::memset(pv, 0.0);
        for lt in 0..atp.num_large_tiles_per_section {
            let acc = nl::ndarray(pv_shape, ac.mm_out_dtype, buffer = nl::psum);
            let mut used = false;
            for sub in 0..v_per_large {
                let vt = v_per_large * lt + sub;
                let t: KvTile = kv_tile(ac, atp, sp.section_offset + V_TILE_SZ * vt, V_TILE_SZ);
                if vt < atp.num_v_tiles_per_section && t.keys > 0 && has_compute(ac, atp, grp.grp, t, V_TILE_SZ) {
                    let p_t = grp.exp_tp_sb[s![0..t.keys, V_TILE_SZ * vt..V_TILE_SZ * vt + rows]];
                    let v_t = sp.v_sb[s![0..t.keys, vt, ..]];
                    if ac.tp_out {
                        nisa::nc_matmul(acc[s![.., 0..rows]], v_t, p_t);
                    } else {
                        nisa::nc_matmul(acc[s![0..rows, ..]], p_t, v_t);
                    }
                    used = true;
                }
            }
            if used {
                if ac.tp_out {
                    nisa::tensor_tensor(pv[s![.., 0..rows]], pv[s![.., 0..rows]], acc[s![.., 0..rows]], nl::add);
                } else {
                    nisa::tensor_tensor(pv[s![0..rows, ..]], pv[s![0..rows, ..]], acc[s![0..rows, ..]], nl::add);
                }
            }
        }
    }

    /// Writes the group's rows of `x` (`(Q_GRP_SZ, d)`, or `(d, Q_GRP_SZ)` with `tp_out`)
    /// to the output, cast to its dtype.
    #[nki_helper]
    fn write_rows(ac: AttnConfig, io: AttnTensors, grp: GroupBuffers, x: Sbuf) {
        let (b, q0, rows) = (grp.batch_id, grp.q0, grp.rows);
        if ac.tp_out {
            nisa::dma_copy(io.o[s![b, .., q0..q0 + rows]], x[s![.., 0..rows]]);
        } else {
            nisa::dma_copy(io.o[s![b, q0..q0 + rows, ..]], x[s![0..rows, ..]]);
        }
    }

    /// `x * column` per query row: `(Q_GRP_SZ, d)` scaled by partition, or `(d, Q_GRP_SZ)`
    /// scaled by column after a PE transpose of the broadcast column.
    #[nki_helper]
    fn scale_rows(dst: Sbuf, x: Sbuf, column: Sbuf, rows: i64, d: i64, tp_out: bool) {
        if tp_out {
            let flipped = nl::ndarray([d, Q_GRP_SZ], nl::float32, buffer = nl::psum);
            nisa::nc_transpose(flipped, column.broadcast(1, d));
            let factors = nl::ndarray([d, Q_GRP_SZ], nl::float32, buffer = nl::sbuf);
            nisa::tensor_copy(factors[s![.., 0..rows]], flipped[s![.., 0..rows]]);
            nisa::tensor_tensor(dst[s![.., 0..rows]], x[s![.., 0..rows]], factors[s![.., 0..rows]], nl::multiply);
        } else {
            nisa::tensor_scalar(dst[s![0..rows, ..]], x[s![0..rows, ..]], nl::multiply, column[s![0..rows, ..]]);
        }
    }

    /// The library's `_write_back_o_impl`: writes `x` as the group's output rows,
    /// first multiplied by the reciprocal row sums `recip` when `normalize`.
    #[nki_helper]
    fn write_back_o_impl(ac: AttnConfig, io: AttnTensors, grp: GroupBuffers, x: Sbuf, recip: Sbuf, normalize: bool) {
        if normalize {
            let shape = if ac.tp_out { [ac.d, Q_GRP_SZ] } else { [Q_GRP_SZ, ac.d] };
            let normalized = nl::ndarray(shape, ac.mm_out_dtype, buffer = nl::sbuf);
            scale_rows(normalized, x, recip, grp.rows, ac.d, ac.tp_out);
            write_rows(ac, io, grp, normalized);
        } else {
            write_rows(ac, io, grp, x);
        }
    }

    /// The library's `_write_back_impl`: the running row sum, its reciprocal on the
    /// group's last section, and the output: this section's PV on the first section,
    /// else the earlier output (read back from HBM) times the correction plus PV.
    #[nki_helper]
    fn write_back_impl(ac: AttnConfig, sp: SectionParams, bufs: AttnInternalBuffers, io: AttnTensors, grp: GroupBuffers) {
        let (b, q0, rows, g) = (grp.batch_id, grp.q0, grp.rows, grp.grp);
        let (pv, corr) = (grp.mm2_sb, grp.flash_attn_correction_factor);
        let run_sum = bufs.exp_running_sum[s![.., g]];
        let recip = bufs.exp_sum_reciprocal[s![.., g]];
        let sec_sum = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(sec_sum, nl::add, grp.exp_partial_sum, 1);
        if sp.section_idx == 0 {
            nisa::tensor_copy(run_sum, sec_sum);
        } else {
            let prev_sum = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_copy(prev_sum, run_sum);
            nisa::tensor_scalar(run_sum, prev_sum, nl::multiply, corr, op1 = nl::add, operand1 = sec_sum);
        }
        let normalize = grp.last_section && !ac.skip_output_normalization;
        if normalize {
            nisa::reciprocal(recip, run_sum);
        }
        if sp.section_idx == 0 {
            write_back_o_impl(ac, io, grp, pv, recip, normalize);
        } else {
            let pv_shape = if ac.tp_out { [ac.d, Q_GRP_SZ] } else { [Q_GRP_SZ, ac.d] };
            let prev_out = nl::ndarray(pv_shape, ac.mm_out_dtype, buffer = nl::sbuf);
            let merged = nl::ndarray(pv_shape, nl::float32, buffer = nl::sbuf);
            if ac.tp_out {
                nisa::dma_copy(prev_out[s![.., 0..rows]], io.o[s![b, .., q0..q0 + rows]]);
                let rescaled = nl::ndarray(pv_shape, nl::float32, buffer = nl::sbuf);
                scale_rows(rescaled, prev_out, corr, rows, ac.d, true);
                nisa::tensor_tensor(merged[s![.., 0..rows]], rescaled[s![.., 0..rows]], pv[s![.., 0..rows]], nl::add);
            } else {
                nisa::dma_copy(prev_out[s![0..rows, ..]], io.o[s![b, q0..q0 + rows, ..]]);
                let (prev, sum) = (prev_out[s![0..rows, ..]], pv[s![0..rows, ..]]);
                nisa::scalar_tensor_tensor(merged[s![0..rows, ..]], prev, nl::multiply, corr[s![0..rows, ..]], nl::add, sum);
            }
            write_back_o_impl(ac, io, grp, merged, recip, normalize);
        }
    }

    /// The library's `_attention_cte_impl`: attention over batch `b` for query groups
    /// `[g_start, g_start + g_count)` — every KV section, every group that sees it,
    /// then the cached statistics.
    #[nki_helper]
    fn attention_cte_impl(ac: AttnConfig, io: AttnTensors, b: i64, g_start: i64, g_count: i64) {
        let atp: AttnTileParams = compute_tile_parameters(ac);
        let bufs: AttnInternalBuffers = allocate_batch_buffers(ac, atp, io, b);
        for sec in 0..atp.num_sections {
            let sp: SectionParams = section_params(ac, atp, io, sec);
            load_kv_impl(ac, atp, bufs, io, sp);
            for g in g_start..g_start + g_count {
                let (group_on, last): (bool, bool) = group_in_section(ac, atp, sp, g);
                if group_on {
                    let grp: GroupBuffers = allocate_group_buffers(ac, atp, b, g, last);
                    load_q_impl(ac, io, grp);
                    qk_and_max_impl(ac, atp, sp, bufs, io, grp);
                    update_max_impl(atp, sp, bufs, grp);
                    exp_impl(ac, atp, sp, bufs, grp);
                    pv_impl(ac, atp, sp, grp);
                    write_back_impl(ac, sp, bufs, io, grp);
                }
            }
        }
        // Cached statistics: column g of batch b holds rows Q_GRP_SZ g .. Q_GRP_SZ g + Q_GRP_SZ - 1.
        let g_end = g_start + g_count;
        if let Some(nm) = io.out_neg_max {
            nisa::dma_copy(nm[s![b, .., g_start..g_end]], bufs.mm1_running_max[s![.., g_start..g_end]]);
        }
        if let Some(sm) = io.out_sum_recip {
            let sums = if ac.skip_output_normalization { bufs.exp_running_sum } else { bufs.exp_sum_reciprocal };
            nisa::dma_copy(sm[s![b, .., g_start..g_end]], sums[s![.., g_start..g_end]]);
        }
    }

    /// The library's `_check_input_and_return_shape`: which optional inputs go
    /// together, and every tensor's shape.
    #[nki_helper]
    fn check_inputs(ac: AttnConfig, io: AttnTensors, cache_softmax: bool) {
        let prefix = ac.is_prefix_caching;
        let (bs, bs_kv, s_q, s_k, s_p, d) = (ac.bs, ac.bs_kv, ac.seqlen_q, ac.seqlen_k_active, ac.seqlen_k_prior, ac.d);
        assert!(!prefix || io.v_prior.is_some(), "k_prior is not None but v_prior is None for prefix caching");
        assert!(!prefix || io.prior_used_len.is_some(), "k_prior is not None but prior_used_len is None for prefix caching");
        assert!(prefix || io.v_prior.is_none(), "k_prior is None but v_prior is not None.");
        assert!(prefix || io.prior_used_len.is_none(), "k_prior is None but prior_used_len is not None.");
        assert!(io.bound_min.is_some() == io.bound_max.is_some(), "bound_min and bound_max must both be set or both be None");
        let prior_used_len = io.prior_used_len;
        if let Some(pul) = prior_used_len {
            let pul_shape = pul.shape();
            assert!(
                pul.ndim() == 1 && pul_shape[0] == 1,
                "Received unexpected shape for prior_used_len. Expected (1,), received {pul_shape}"
            );
        }
        let k_shape = io.k.shape();
        let want_k = if ac.tp_k { [bs_kv, s_k, d] } else { [bs_kv, d, s_k] };
        assert!(
            io.k.ndim() == 3 && k_shape[1] == want_k[1] && k_shape[2] == want_k[2],
            "Received unexpected shape for k. Expected {want_k}, received {k_shape}"
        );
        check_shape3(io.v, "v", bs_kv, s_k, d);
        let k_prior = io.k_prior;
        if let Some(kp) = k_prior {
            let want_kp = if ac.tp_k { [bs_kv, s_p, d] } else { [bs_kv, d, s_p] };
            check_shape3(kp, "k_prior", bs_kv, want_kp[1], want_kp[2]);
        }
        let v_prior = io.v_prior;
        if let Some(vp) = v_prior {
            check_shape3(vp, "v_prior", bs_kv, s_p, d);
        }
        assert!(
            !cache_softmax || s_q % Q_GRP_SZ == 0,
            "For cache softmax, attention_cte currently expects seqlen_q multiple of 128, got seqlen_q={s_q}"
        );
        check_bound(io.bound_min, "bound_min", bs, s_q);
        check_bound(io.bound_max, "bound_max", bs, s_q);
        check_feature_inputs(ac, io);
        assert!(!ac.is_sequence_packed || !prefix, "is_sequence_packed is not supported with prefix caching");
        assert!(!ac.is_sequence_packed || ac.global_cp_deg <= 1, "is_sequence_packed is not supported with context parallelism");
    }

    /// `t` is `(d0, d1, d2)`, as the library's input check words it.
    #[nki_helper]
    fn check_shape3(t: Hbm, name: &str, d0: i64, d1: i64, d2: i64) {
        let shape = t.shape();
        assert!(
            t.ndim() == 3 && shape[0] == d0 && shape[1] == d1 && shape[2] == d2,
            "Received unexpected shape for {name}. Expected ({d0}, {d1}, {d2}), received {shape}"
        );
    }

    /// A sequence bound (`bound_min` or `bound_max`), when given, is `(batch, seqlen_q, 1)`.
    #[nki_helper]
    fn check_bound(t: Option<Hbm>, name: &str, bs: i64, s_q: i64) {
        if let Some(b) = t {
            let shape = b.shape();
            assert!(
                b.ndim() == 3 && shape[0] == bs && shape[1] == s_q && shape[2] == 1,
                "{name} shape must be (batch, seqlen_q, 1)=({bs}, {s_q}, 1), got {shape}"
            );
        }
    }

    /// The shapes and exclusions of this kernel's extensions: segment ids and bias.
    #[nki_helper]
    fn check_feature_inputs(ac: AttnConfig, io: AttnTensors) {
        let (bs, bs_kv, s_q, s_k) = (ac.bs, ac.bs_kv, ac.seqlen_q, ac.seqlen_k_active);
        let unsupported = ac.is_prefix_caching || ac.sliding_window != 0;
        assert!(
            io.q_segment_ids.is_some() == io.kv_segment_ids.is_some(),
            "q_segment_ids and kv_segment_ids must both be set or both be None"
        );
        let mut q_rows = 0;
        let q_segment_ids = io.q_segment_ids;
        if let Some(qs) = q_segment_ids {
            let qs_shape = qs.shape();
            q_rows = qs_shape[0];
            assert!(
                qs.ndim() == 2 && qs_shape[1] == s_q && qs_shape[0] >= 1 && bs % qs_shape[0] == 0,
                "q_segment_ids must be (batch, seqlen_q) with batch dividing {bs}, got {qs_shape}"
            );
            assert!(s_q % Q_GRP_SZ == 0, "segment ids need seqlen_q a multiple of 128, got {s_q}");
            assert!(!unsupported, "segment ids are not supported with prefix caching or sliding_window");
        }
        let kv_segment_ids = io.kv_segment_ids;
        if let Some(ks) = kv_segment_ids {
            let ks_shape = ks.shape();
            assert!(
                ks.ndim() == 2 && ks_shape[0] == q_rows && ks_shape[1] == s_k && bs_kv % q_rows == 0,
                "kv_segment_ids must be ({q_rows}, {s_k}) to match q_segment_ids and k, got {ks_shape}"
            );
        }
        let bias = io.bias;
        if let Some(bi) = bias {
            let bi_shape = bi.shape();
            assert!(
                bi.ndim() == 3 && bi_shape[0] == bs && bi_shape[1] == s_q && bi_shape[2] == s_k,
                "bias must be (bs, seqlen_q, seqlen_kv)=({bs}, {s_q}, {s_k}), got {bi_shape}"
            );
            assert!(bi.dtype() == nl::float32, "bias must be float32");
            assert!(!unsupported, "bias is not supported with prefix caching or sliding_window");
        }
    }

    /// The library's limits and the flag combinations it supports.
    #[nki_helper]
    pub(crate) fn check_config(ac: AttnConfig, io: AttnTensors, cache_softmax: bool) {
        let (bs, bs_kv, s_q, d, sw, scale) = (ac.bs, ac.bs_kv, ac.seqlen_q, ac.d, ac.sliding_window, ac.scale);
        let (use_cp, use_swa, prefix, striped) = (ac.use_cp, ac.use_swa, ac.is_prefix_caching, ac.cp_striped_input);
        assert!(bs > 0, "Batch size must be positive, got {bs}");
        assert!(bs <= MAX_BS, "attention_cte kernel is not tested for batch size above 512, got {bs}.");
        assert!(bs_kv > 0, "Batch size must be positive, got {bs_kv}");
        assert!(bs % bs_kv == 0, "Q batch size must be a multiple of KV batch size, got bs={bs}, bs_kv={bs_kv}");
        assert!(s_q <= MAX_SEQLEN, "attention_cte kernel is not tested for seqlen above 131072, got seqlen_q={s_q}.");
        let s_k_total = ac.seqlen_k_active + ac.seqlen_k_prior;
        assert!(s_k_total <= MAX_SEQLEN, "attention_cte kernel is not tested for seqlen above 131072, got seqlen_k_total={s_k_total}.");
        assert!(sw <= MAX_SEQLEN, "attention_cte kernel is not tested for sliding window above 131072, got {sw}.");
        assert!(d > 0, "d must be > 0, got d={d}.");
        assert!(d <= MAX_HEAD_DIM, "we do not support head_dim > 128, got head dim {d}");
        let mm_out_dtype = ac.mm_out_dtype;
        assert!(
            mm_out_dtype == nl::float32 || (mm_out_dtype == nl::bfloat16 && nisa::get_nc_version() >= nisa::nc_version::gen4),
            "mm_out_dtype (psum) should be in [float32, bfloat16], and 2-byte dtype is only allows in gen4+ (Trn3+),but got dtype {mm_out_dtype}"
        );
        let cp_deg = ac.global_cp_deg;
        assert!(
            cp_deg == 0 || (1 <= cp_deg && cp_deg <= MAX_GLOBAL_CP_DEGREE),
            "attention_cte kernel is not tested for global_cp_deg outside [1, 32], got global_cp_deg={cp_deg}."
        );
        assert!(!ac.skip_output_normalization || cache_softmax, "skip_output_normalization=True requires cache_softmax=True");
        assert!(!(use_swa || prefix || use_cp) || scale == 1.0, "SWA/Prefix Caching/CP only support scale=1.0, but got ac.scale={scale}");
        // CteRule::ScaleNotFinite and CteRule::CausalScale (crate::scale::MIN_MASKED_SCALE): the causal mask's FLOAT32_MIN is scaled.
        assert!(
            f32::MIN <= scale && scale <= f32::MAX && (!ac.causal_mask || scale >= 1e-30),
            "scale must be a finite float32, and at least 1e-30 with causal_mask (masked scores are FLOAT32_MIN * scale), got {scale}"
        );
        assert!(!use_cp || ac.causal_mask, "CP currently only supports causal attn");
        assert!(!use_swa || ac.causal_mask, "SWA currently only supports causal attn");
        assert!(!striped || use_cp, "cp_striped_input requires CP mode (global_cp_deg must be set)");
        assert!(!striped || ac.causal_mask, "Striped CP requires causal_mask=True");
        assert!(!striped || !use_swa, "Striped CP does not yet support SWA");
        assert!(!striped || !prefix, "Striped CP does not yet support prefix caching");
        assert!(!use_cp || io.cp_offset.is_some(), "cp_offset missing but global_cp_deg is provided");
        let cp_offset = io.cp_offset;
        if let Some(cpo) = cp_offset {
            let cpo_shape = cpo.shape();
            assert!(!use_cp || (cpo.ndim() == 2 && cpo_shape[0] == 1 && cpo_shape[1] == 1), "cp_offset shape must be (1, 1) for CP attn");
        }
    }

    /// The first LNC program's share of an odd last batch's query groups: more
    /// under a causal mask (its first groups see fewer keys), weighted by the
    /// active and prior keys with prefix caching.
    #[nki_helper]
    fn seqlen_split_factor(ac: AttnConfig, io: AttnTensors) -> f64 {
        let causal_split = ac.causal_mask && (io.cp_offset.is_none() || ac.cp_strided_q_slicing) && ac.sliding_window == 0;
        let mut frac = if causal_split { SEQLEN_SHARDING_SPLIT_FACTOR_CAUSAL } else { SEQLEN_SHARDING_SPLIT_FACTOR_DEFAULT };
        if let Some(vp) = io.v_prior {
            if causal_split {
                let active = io.v.shape()[1] as f64;
                let prior = vp.shape()[1] as f64;
                frac = (SEQLEN_SHARDING_SPLIT_FACTOR_CAUSAL * active + SEQLEN_SHARDING_SPLIT_FACTOR_DEFAULT * prior) / (active + prior);
            }
        }
        frac
    }

    /// The prefix cache's arguments.
    #[nki_params]
    pub struct PrefixCache {
        /// Prefix-cache keys, in `k`'s layout.
        #[dtypes(float32, bfloat16, float16)]
        pub k_prior: Option<Hbm>,
        /// Prefix-cache values `(bs_kv, seqlen_prior, d)`.
        #[dtypes(float32, bfloat16, float16)]
        pub v_prior: Option<Hbm>,
        /// The prefix's used length `(bs_kv, 1)`.
        #[dtypes(int32)]
        pub prior_used_len: Option<Hbm>,
    }

    /// The layouts, the cached softmax statistics and the dtypes.
    #[nki_params]
    pub struct CteOptions {
        /// `q` is `(bs, seqlen_q, d)` (else `(bs, d, seqlen_q)`).
        #[default(true)]
        pub tp_q: bool,
        /// `k` is `(bs_kv, seqlen_kv, d)` (else `(bs_kv, d, seqlen_kv)`).
        #[default(false)]
        pub tp_k: bool,
        /// The output is `(bs, d, seqlen_q)`.
        #[default(false)]
        pub tp_out: bool,
        /// Return each row's max and reciprocal sum too.
        #[default(false)]
        pub cache_softmax: bool,
        /// The softmax's dtype.
        #[default(nl::float32)]
        pub softmax_dtype: Dtype,
        /// The dtype of matmul results in PSUM.
        #[default(nl::float32)]
        pub mm_out_dtype: Dtype,
    }

    /// Context parallelism and sequence packing: this rank's offset, the
    /// degree, how Q is sliced, and per-row key bounds.
    #[nki_params]
    pub struct ContextParallel {
        /// This rank's position offset.
        #[dtypes(int32, float32)]
        pub cp_offset: Option<Hbm>,
        /// The context-parallel degree.
        pub global_cp_deg: Option<i64>,
        /// CP with row-strided Q.
        #[default(false)]
        pub cp_strided_q_slicing: bool,
        /// Per-row first key `(bs, seqlen_q, 1)` (sequence packing).
        #[dtypes(int32, float32)]
        pub bound_min: Option<Hbm>,
        /// Per-row last key, like `bound_min`.
        #[dtypes(int32, float32)]
        pub bound_max: Option<Hbm>,
        /// CP with striped Q and K/V.
        #[default(false)]
        pub cp_striped_input: bool,
    }

    /// What changes the scores besides the causal and window masks: the soft
    /// cap, segment ids and an additive bias (the ring kernels take them too).
    #[nki_params]
    pub struct ScoreFeatures {
        /// The soft cap `C` of `C·tanh(scale·s / C)`.
        #[range(> 0.0, <= 3.4028234663852886e38)]
        pub soft_cap: Option<f64>,
        /// The queries' segment ids.
        #[dtypes(int32)]
        pub q_segment_ids: Option<Hbm>,
        /// The keys' segment ids.
        #[dtypes(int32)]
        pub kv_segment_ids: Option<Hbm>,
        /// An additive score bias.
        #[dtypes(float32)]
        pub bias: Option<Hbm>,
    }

    /// Flash attention for prefill (context encoding), a drop-in for the NKI
    /// library's `attention_cte` (2.30): causal or not, sliding window, context
    /// parallelism (contiguous, strided or striped Q), prefix caching, sink tokens,
    /// native GQA, cached softmax statistics, sequence packing and LNC2 sharding.
    ///
    /// Layouts: `q` is `(bs, seqlen_q, d)` (`(bs, d, seqlen_q)` when not `tp_q`), `k`
    /// is `(bs_kv, d, seqlen_kv)` (`(bs_kv, seqlen_kv, d)` with `tp_k`), `v` is
    /// `(bs_kv, seqlen_kv, d)`. Returns the output (`(bs, seqlen_q, d)`, or
    /// `(bs, d, seqlen_q)` with `tp_out`) and, with `cache_softmax`, the negated row
    /// max and the reciprocal row sum (the raw sum with `skip_output_normalization`),
    /// each `(bs, 128, ceil(seqlen_q / 128))` with row `128 g + p` at `[.., p, g]`.
    /// Past the library's keyword arguments, `soft_cap` (default off) caps the
    /// logits to `C·tanh(scale·q·k / C)` before the masks (the ring kernels use it),
    /// and `q_segment_ids` / `kv_segment_ids` (`(batch, seqlen_q)` / `(batch,
    /// seqlen_kv)`, any dtype holding integers below 2^24, query batch `i` reading
    /// row `i / (bs / batch)`) show a key only to the queries with its id. A row that
    /// sees no key keeps the masked sentinel statistics (negated max FLOAT32_MAX), so
    /// the ring's merge and normalisation can tell it. `bias` (float32 `(bs,
    /// seqlen_q, seqlen_kv)`) is added to the logits after the soft cap, before the
    /// masks.
    ///
    /// The kernel checks its inputs, gathers them in [`AttnConfig`] and
    /// [`AttnTensors`], and runs [`attention_cte_impl`] per batch of its LNC program.
    #[nki_kernel]
    pub fn attention_cte(
        #[dtypes(float32, bfloat16, float16)] q: Hbm,
        #[dtypes(float32, bfloat16, float16)] k: Hbm,
        #[dtypes(float32, bfloat16, float16)] v: Hbm,
        #[default(1.0)] scale: f64,
        #[default(true)] causal_mask: bool,
        #[spread] _: PrefixCache,
        #[dtypes(float32, bfloat16, float16)] sink: Option<Hbm>,
        #[range(>= 0)] sliding_window: Option<i64>,
        #[spread] _: CteOptions,
        #[spread] _: ContextParallel,
        #[default(false)] skip_output_normalization: bool,
        #[spread] _: ScoreFeatures,
    ) -> Outputs {
        let sw = sliding_window.unwrap_or(0);
        let [bs, s_q, d] = if tp_q { q.shape() } else { [q.shape()[0], q.shape()[2], q.shape()[1]] };
        let ac = AttnConfig {
            bs,
            bs_kv: k.shape()[0],
            seqlen_q: s_q,
            seqlen_k_active: kv_len(Some(k), tp_k),
            seqlen_k_prior: kv_len(k_prior, tp_k),
            d,
            tp_q,
            tp_k,
            tp_out,
            is_prefix_caching: k_prior.is_some(),
            causal_mask,
            use_swa: sw > 0,
            sliding_window: sw,
            use_cp: global_cp_deg.is_some(),
            global_cp_deg: global_cp_deg.unwrap_or(1),
            cp_strided_q_slicing,
            cp_striped_input,
            scale,
            mm_out_dtype,
            is_sequence_packed: bound_min.is_some(),
            skip_output_normalization,
            soft_cap: soft_cap.unwrap_or(0.0),
            has_sink: sink.is_some(),
        };
        let groups = (s_q + Q_GRP_SZ - 1) / Q_GRP_SZ;
        let out_shape = if tp_out { [bs, d, s_q] } else { [bs, s_q, d] };
        let stat_shape = [bs, P_MAX, groups];
        let io = AttnTensors {
            q,
            k,
            v,
            o: nl::ndarray(out_shape, q.dtype(), buffer = nl::shared_hbm),
            out_neg_max: if cache_softmax { Some(nl::ndarray(stat_shape, softmax_dtype, buffer = nl::shared_hbm)) } else { None },
            out_sum_recip: if cache_softmax { Some(nl::ndarray(stat_shape, softmax_dtype, buffer = nl::shared_hbm)) } else { None },
            k_prior,
            v_prior,
            prior_used_len,
            sink,
            cp_offset,
            bound_min,
            bound_max,
            q_segment_ids,
            kv_segment_ids,
            bias,
        };
        check_inputs(ac, io, cache_softmax);
        check_config(ac, io, cache_softmax);

        // LNC sharding: whole batches per program; the odd last batch is split by
        // query groups from SEQLEN_SHARDING_THRESHOLD rows (see remainder_groups).
        let grid = nl::program_ndim() == 1;
        let shard = if grid { nl::program_id(0) } else { 0 };
        let shards = if grid { nl::num_programs(0) } else { 1 };
        let per_shard = bs / shards;
        let has_remainder = bs % shards != 0;
        let frac: f64 = seqlen_split_factor(ac, io);
        let (rem_start, rem_end): (i64, i64) = remainder_groups(shard, s_q, groups, frac);
        let items = per_shard + if has_remainder && rem_end > rem_start { 1 } else { 0 };
        for item in 0..items {
            let whole = item < per_shard;
            let b = if whole { shard * per_shard + item } else { bs - 1 };
            let g_start = if whole { 0 } else { rem_start };
            let g_end = if whole { groups } else { rem_end };
            attention_cte_impl(ac, io, b, g_start, g_end - g_start);
        }
        if let Some(nm) = io.out_neg_max {
            if let Some(sm) = io.out_sum_recip {
                return Outputs(io.o, nm, sm);
            }
        }
        Outputs(io.o)
    }
}
