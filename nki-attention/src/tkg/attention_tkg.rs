//! `attention_tkg`: the NKI library's token-generation (decode) attention over a
//! KV cache, written in the DSL.
//!
//! A decode step attends `s_active` new tokens (1, or a few with speculative
//! decoding) of `q_head` query heads that share one KV head (GQA: the kernel is
//! called per KV head) to a KV cache of `curr_sprior` positions whose last
//! `s_active` slots are the active tokens: key `j < curr_sprior - s_active` comes
//! from `k_prior` / `v_prior`, the rest from `k_active` / `v_active`. A `uint8`
//! mask `[curr_sprior, bs, q_head, s_active]` says which keys each query sees
//! (nonzero: visible) — or, with `use_pos_id`, only the active keys' block, the
//! cached keys' visibility generated from `rope_pos_ids` (and a per-query sliding
//! window from `start_pos_ids`); an optional sink logit per head joins every
//! softmax denominator. With `fuse_rope` the kernel rotates `q` and `k_active` by
//! `inv_freqs · rope_pos_ids` and scales `q` by `1/sqrt(d)`; without it `q` comes
//! scaled.
//!
//! Phases (the library's names):
//!
//! 0. `perform_rope`: the queries `(d, bs·q_head·s_active)` and active keys
//!    `(d, bs·s_active)` of every batch staged in SBUF in `q`'s / `k_active`'s
//!    dtype, rotated when RoPE is fused (`rope`: the angles range-reduced to the
//!    sine's `[-π, π]` domain in fp32, as the library does); the active keys are
//!    the `k_out` output.
//! 1. Per batch (with LNC2 the batches alternate between the two programs, as the
//!    library's batch sharding splits them), `allocate_fa_buffers`: the batch's
//!    `q_head · s_active` query columns `(d, n)`, stationary in every QK matmul so
//!    queries land on partitions and every softmax reduction runs along the free
//!    axis; the position columns; the running statistics.
//! 2. For every flash-attention tile of [`FA_TILE_SIZE`] keys (the whole cache in
//!    one tile without `enable_fa_s_prior_tiling`):
//!    - `compute_qk_matmul`: QK per [`MM1_KEYS`] keys into PSUM, copied under the
//!      mask predicate (`load_mask`, or `gen_mask_tkg` from positions) onto a tile
//!      preset to `FLOAT32_MIN`;
//!    - `fa_update_running_max`: the tile max (negated), merged into the running
//!      max, the correction `exp(max_old - max_new)`;
//!    - `compute_exp_qk`: `exp(s - max)` in `q`'s dtype and the fp32 row sums of
//!      those rounded values (what the PV matmul weighs);
//!    - `compute_pv_matmul`: PV per 128 keys, probabilities PE-transposed to
//!      `(keys, n)`, accumulated in PSUM; `fa_accumulate_output` adds it to the
//!      running output after scaling that by the correction.
//! 3. `fa_finalize_and_store`: normalise by the running sum (which starts at
//!    `exp(sink - sink) = 1` with the running max at the sink, so the sink needs no
//!    separate pass) and store each column as `out[b, h, :, t]` (or column
//!    `b·n + p` of the `out_in_sb` layout).
//!
//! The library puts the keys on partitions for QK (`KQᵀ`) and transposes the
//! statistics instead; the numerics are the same (fp32 scores and statistics,
//! matmul operands in `q`'s dtype, fp32 accumulation).

use nki::prelude::*;

pub use decode::*;

/// The kernel with its tile constants, its configuration bundle and its phase helpers.
#[nki_module]
pub mod decode {
    use nki::prelude::*;

    /// SBUF and PSUM partitions: the cache length's granularity, the most query
    /// columns of one batch, and the keys contracted by one PV matmul.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Keys per QK matmul: one 2 KiB PSUM bank holds 512 fp32 columns.
    pub const MM1_KEYS: i64 = 512;
    /// Keys per PV accumulation group in one PSUM tile (four QK tiles).
    pub const PV_GROUP_KEYS: i64 = 2048;
    /// Keys per flash-attention tile (the library's `_FA_TILE_SIZE`): longer caches
    /// are streamed tile by tile with a running max and sum.
    pub const FA_TILE_SIZE: i64 = 8192;

    /// `TkgRule::QkLayout`: q and k_active arrive in HBM layouts only for fused RoPE.
    pub const QK_LAYOUT: &str = "attention_tkg: without fuse_rope, q and k_active come in the qk_in_sb layouts (d, bs*q_head*s_active) and (d, bs*s_active): qk_in_sb must be True";
    /// `TkgRule::RopeHeadEven`: RoPE rotates the two halves of the head dimension.
    pub const ROPE_HEAD_EVEN: &str = "attention_tkg: fuse_rope rotates the halves of the head dimension: d_head must be even";
    /// `TkgRule::RopeSprior`: the RoPE angles are range-reduced in float32.
    pub const ROPE_SPRIOR: &str = "attention_tkg: fuse_rope range-reduces its angles in float32: curr_sprior must be at most 131072";
    /// `TkgRule::BlockKv`: a block cache comes with its table and the library's layouts.
    pub const BLOCK_KV: &str = "attention_tkg: a block KV cache (block_len > 0) needs active_blocks_table (bs, curr_sprior / block_len), tp_k_prior=True, qk_in_sb=True and curr_sprior a multiple of block_len";
    /// `TkgRule::BlockFolds`: the library's folds of `P_MAX` blocks tile each core's cache.
    pub const BLOCK_FOLDS: &str = "attention_tkg: with a block KV cache each core's curr_sprior must be whole folds of 128 blocks of the reduced block length, which must divide 512";
    /// `TkgRule::WindowNeedsPosId`: the sliding window is part of the generated mask.
    pub const WINDOW_NEEDS_POS_ID: &str =
        "attention_tkg: a sliding window (start_pos_ids) is part of the generated mask: it needs use_pos_id=True";
    /// An fp8 KV cache is all four KV tensors in `float8_e4m3`.
    pub const FP8_KV_ALL: &str =
        "attention_tkg: an fp8 KV cache has k_prior, v_prior, k_active and v_active all in float8_e4m3 (q in float8_e4m3 only with it)";
    /// An fp8 KV cache's queries: not float32, no fused RoPE, the `qk_in_sb` layouts.
    pub const FP8_KV_QUERY: &str = "attention_tkg: with an fp8 KV cache q must not be float32, fuse_rope must be False and qk_in_sb True";
    /// The largest `curr_sprior` with fused RoPE (the library's `_MAX_S_PRIOR_ACCURATE_ROPE`).
    pub const MAX_SPRIOR_ROPE: i64 = 131072;

    /// The library's `AttnTKGConfig`: shapes and flags of one call, with the
    /// library's field names, order and defaults. `strided_mm1` and `use_gpsimd_sb2sb`
    /// choose DMA patterns and engines of the library's layout and are accepted
    /// with no effect on the result. The in-SBUF layouts (`qk_in_sb`,
    /// `k_out_in_sb`, `out_in_sb`) are the tensors' layouts, in HBM here.
    #[nki_object]
    pub struct AttnTKGConfig {
        /// Batch size.
        #[default(0)]
        pub bs: i64,
        /// Query heads sharing the KV head (the GQA ratio).
        #[default(0)]
        pub q_head: i64,
        /// Active tokens per sequence (more than 1 with speculative decoding).
        #[default(0)]
        pub s_active: i64,
        /// Cache positions in use, the active tokens last.
        #[default(0)]
        pub curr_sprior: i64,
        /// Cache capacity: the sequence length of k_prior and v_prior.
        #[default(0)]
        pub full_sprior: i64,
        /// Head dimension.
        #[default(0)]
        pub d_head: i64,
        /// Block length of a block KV cache (k_prior / v_prior (blocks, block_len, d), active_blocks_table); 0: a flat cache.
        #[default(0)]
        pub block_len: i64,
        /// k_prior is (B+, 1, full_sprior, d) and is transposed while loading (else (B+, 1, d, full_sprior)).
        #[default(false)]
        pub tp_k_prior: bool,
        /// The library's strided K load for QK (a DMA pattern; no effect on the result).
        #[default(true)]
        pub strided_mm1: bool,
        /// The cached keys' mask is generated from rope_pos_ids (and start_pos_ids); the mask input is then the (s_active, bs, q_head, s_active) active block.
        #[default(false)]
        pub use_pos_id: bool,
        /// RoPE of q and k_active by inv_freqs and rope_pos_ids inside the kernel, q scaled by 1/sqrt(d_head); the rotated keys are returned as k_out.
        #[default(false)]
        pub fuse_rope: bool,
        /// GPSIMD SBUF-to-SBUF copies between LNC2 programs (an engine choice; no effect on the result).
        #[default(true)]
        pub use_gpsimd_sb2sb: bool,
        /// q is (d, bs*q_head*s_active) and k_active (d, bs*s_active), else (bs, q_head, s_active, d) and (bs, 1, s_active, d).
        #[default(false)]
        pub qk_in_sb: bool,
        /// k_out is (d, bs*s_active), else (bs, 1, d, s_active).
        #[default(false)]
        pub k_out_in_sb: bool,
        /// out is (d, bs*q_head*s_active), else (bs, q_head, d, s_active).
        #[default(false)]
        pub out_in_sb: bool,
        /// Longer caches are streamed in FA_TILE_SIZE-key tiles with a running max and sum (else one pass over every key).
        #[default(true)]
        pub enable_fa_s_prior_tiling: bool,
    }

    /// The call's tensors: the cache, values and mask from HBM as given, the
    /// queries and active keys staged in SBUF (after RoPE when fused), the output.
    #[nki_object]
    pub struct AttnTensors {
        /// Queries of every batch, `(d, bs·q_head·s_active)` in `q`'s dtype (scaled by `1/sqrt(d)` with fused RoPE).
        pub q_sb: Tensor,
        /// Active keys of every batch, `(d, bs·s_active)` (after RoPE when fused).
        pub k_active_sb: Tensor,
        /// Active values, `(bs, 1, s_active, d)`.
        pub v_active: Tensor,
        /// The key cache.
        pub k_prior: Tensor,
        /// The value cache.
        pub v_prior: Tensor,
        /// The uint8 mask: `(curr_sprior, bs, q_head, s_active)`, or its active block `(s_active, ...)` with `use_pos_id`.
        pub mask: Tensor,
        /// Position of each active token, `(bs, s_active)`.
        pub rope_pos_ids: Option<Tensor>,
        /// First visible cache position of each active token, `(bs, s_active)` (a sliding window).
        pub start_pos_ids: Option<Tensor>,
        /// A sink logit per head.
        pub sink: Option<Tensor>,
        /// The blocks of each batch's cache, `(bs, curr_sprior / block_len)` (a block cache).
        pub active_blocks_table: Option<Tensor>,
        /// The output, `(bs, q_head, d, s_active)` or `(d, bs·q_head·s_active)` with `out_in_sb`.
        pub out: Tensor,
    }

    /// The library's `AttnTileParams` for this kernel: the shapes every phase reads.
    #[nki_object]
    pub struct AttnTileParams {
        /// Query heads sharing the KV head.
        pub q_head: i64,
        /// Active tokens per sequence.
        pub s_active: i64,
        /// Cache positions in use (the keys attended to).
        pub curr_sprior: i64,
        /// Head dimension.
        pub d_head: i64,
        /// Query columns of one batch (`q_head · s_active`).
        pub n_cols: i64,
        /// Query heads of one group: as many whole heads as fit the partitions
        /// (`min(q_head, P_MAX / s_active)`); a group's columns are the partitions
        /// of its score tiles.
        pub group_heads: i64,
        /// The first active key: keys below it come from the cache tensors.
        pub split: i64,
        /// Keys per flash-attention tile.
        pub fa_tile: i64,
        /// Block length of a block cache (0: flat).
        pub block_len: i64,
        /// The library's reduced block length: a block cache's mask lists each fold of
        /// `P_MAX · fold_len` keys block offset by block offset (see `load_mask`).
        pub fold_len: i64,
        /// Keys per core in the library's s_prior sharding (the mask's fold order restarts there).
        pub shard_len: i64,
        /// `k_prior` is `(B+, 1, full_sprior, d)` and is transposed while loading.
        pub tp_k_prior: bool,
        /// The cached keys' mask comes from the position ids.
        pub use_pos_id: bool,
        /// The mask is a per-query sliding window (`start_pos_ids` given).
        pub window: bool,
        /// `out` is `(d, bs·q_head·s_active)`.
        pub out_in_sb: bool,
    }

    /// The library's `FATileContext`: one flash-attention tile of keys.
    #[nki_object]
    pub struct FATileContext {
        /// Its first key.
        pub tile_start: i64,
        /// Its keys (at most `fa_tile`).
        pub tile_len: i64,
    }

    /// The library's `AttnInternalBuffers` of one batch: the queries, the positions and the running state.
    #[nki_object]
    pub struct AttnInternalBuffers {
        /// The batch.
        pub batch_id: i64,
        /// The group's first query head.
        pub head0: i64,
        /// The group's query columns (`heads · s_active`), from column `head0 · s_active` of the batch's.
        pub cols: i64,
        /// Queries, `(d, cols)` in `q`'s dtype: the stationary side of every QK matmul.
        pub q_sb: Tensor,
        /// Per query column, the end of its visible cache positions (`rope_pos_ids`), `(cols, 1)` fp32 (with `use_pos_id`).
        pub pos_end: Tensor,
        /// The batch's row of the block table, `(1, blocks)` int32 (a one-element stand-in for a flat cache).
        pub blocks: Tensor,
        /// Per query column, the start of its sliding window (`start_pos_ids`), `(cols, 1)` fp32 (with a window).
        pub pos_start: Tensor,
        /// Running negated max per query column.
        pub running_negmax: Tensor,
        /// Running row sum per query column.
        pub running_sum: Tensor,
        /// The unnormalised output, `(cols, d)` fp32.
        pub acc: Tensor,
    }

    /// `ids` as an fp32 tile of its shape (position ids may come as int32 or fp32).
    #[nki_helper]
    pub fn as_float32(ids: Sbuf) -> Sbuf {
        let f = nl::ndarray(ids.shape(), nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(f, ids);
        f
    }

    /// `sin(emb + shift)` with the argument first reduced to `[-π, π)` (the
    /// Scalar Engine's sine domain) as the library does: `r = x - 2π·int(x/2π - 1/2)`
    /// for `x = emb + shift + π`, then `sin(r - π)`.
    #[nki_helper]
    fn reduced_sin(emb: Sbuf, shift: f64) -> Sbuf {
        let two_pi = 2.0 * std::f64::consts::PI;
        let shape = emb.shape();
        let x = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(x, emb, nl::add, shift + std::f64::consts::PI);
        let turns = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(turns, x, nl::multiply, 1.0 / two_pi, op1 = nl::add, operand1 = -0.5);
        let whole = nl::ndarray(shape, nl::int32, buffer = nl::sbuf);
        nisa::tensor_copy(whole, turns);
        let span = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(span, whole, nl::multiply, two_pi);
        nisa::tensor_tensor(x, x, span, nl::subtract);
        nisa::tensor_scalar(x, x, nl::add, -std::f64::consts::PI);
        let out = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        nisa::activation(out, nl::sin, x);
        out
    }

    /// The library's `_rope`: `(cos, sin)` of the angles `inv_freqs[j mod d/2] ·
    /// rope_pos_ids[b, t]`, each `(d, bs·s_active)` fp32 (row `j`, column `b·s_a + t`).
    #[nki_helper]
    fn rope(inv_freqs: Hbm, rope_pos_ids: Hbm, d: i64, cols: i64) -> (Sbuf, Sbuf) {
        let half = d / 2;
        let inv = nl::ndarray([d, 1], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(inv[s![0..half, ..]], inv_freqs);
        nisa::dma_copy(inv[s![half..d, ..]], inv_freqs);
        // Every partition reads the whole (bs, s_active) position row.
        let pos_raw = nl::ndarray([d, cols], rope_pos_ids.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(pos_raw, rope_pos_ids.ap([[0, d], [1, cols]]));
        let pos: Sbuf = as_float32(pos_raw);
        let emb = nl::ndarray([d, cols], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(emb, pos, nl::multiply, inv);
        let sin: Sbuf = reduced_sin(emb, 0.0);
        let cos: Sbuf = reduced_sin(emb, 0.5 * std::f64::consts::PI);
        (cos, sin)
    }

    /// The library's `_apply_rope` on `x` `(d, bs·heads·s_a)` (column
    /// `(b·heads + h)·s_a + t`): `x·cos + rotate_half(x)·sin`, where
    /// `rotate_half(x)` is `(-x[d/2..], x[..d/2])`, loaded as `rot`.
    #[nki_helper]
    fn apply_rope(dst: Sbuf, x: Sbuf, rot: Sbuf, cos: Sbuf, sin: Sbuf, heads: i64, s_a: i64) {
        let (d, cols) = (x.shape()[0], x.shape()[1]);
        nisa::tensor_scalar(rot[s![0..d / 2, ..]], rot[s![0..d / 2, ..]], nl::multiply, -1.0);
        let x_cos = nl::ndarray([d, cols], nl::float32, buffer = nl::sbuf);
        for c in 0..cols / s_a {
            let (c0, t0) = (c * s_a, c / heads * s_a);
            nisa::tensor_tensor(x_cos[s![.., c0..c0 + s_a]], x[s![.., c0..c0 + s_a]], cos[s![.., t0..t0 + s_a]], nl::multiply);
            nisa::tensor_tensor(rot[s![.., c0..c0 + s_a]], rot[s![.., c0..c0 + s_a]], sin[s![.., t0..t0 + s_a]], nl::multiply);
        }
        nisa::tensor_tensor(dst, x_cos, rot, nl::add);
    }

    /// Loads `(d, cols)` columns of `src` (the `qk_in_sb` layout, or rows of `d`
    /// read transposed from the HBM layout) into `dst`, the head dimension's two
    /// halves swapped when `swap`.
    #[nki_helper]
    fn load_columns(dst: Sbuf, src: Hbm, in_sb_layout: bool, swap: bool) {
        let (d, cols) = (dst.shape()[0], dst.shape()[1]);
        let half = d / 2;
        let lo = if swap { half } else { 0 };
        let hi = if swap { 0 } else { half };
        if in_sb_layout {
            nisa::dma_copy(dst[s![0..half, ..]], src[s![lo..lo + half, ..]]);
            nisa::dma_copy(dst[s![half..d, ..]], src[s![hi..hi + d - half, ..]]);
        } else {
            nisa::dma_copy(dst[s![0..half, ..]], src.ap([[1, half], [d, cols]], offset = lo));
            nisa::dma_copy(dst[s![half..d, ..]], src.ap([[1, d - half], [d, cols]], offset = hi));
        }
    }

    /// Loads `src` (`heads` columns per active token) into the `(d, cols)` tile
    /// `dst`, rotated by RoPE.
    #[nki_helper]
    fn load_rotated(dst: Sbuf, src: Hbm, in_sb_layout: bool, cos: Sbuf, sin: Sbuf, heads: i64, s_a: i64) {
        let (d, cols) = (dst.shape()[0], dst.shape()[1]);
        let x = nl::ndarray([d, cols], nl::float32, buffer = nl::sbuf);
        load_columns(x, src, in_sb_layout, false);
        let rot = nl::ndarray([d, cols], nl::float32, buffer = nl::sbuf);
        load_columns(rot, src, in_sb_layout, true);
        apply_rope(dst, x, rot, cos, sin, heads, s_a);
    }

    /// Stores the active keys `k_sb` `(d, bs·s_a)` as `k_out`: `(d, bs·s_a)` with
    /// `k_out_in_sb`, else `(bs, 1, d, s_a)`.
    #[nki_helper]
    fn store_k_out(k_out: Hbm, k_sb: Sbuf, cfg: AttnTKGConfig) {
        let s_a = cfg.s_active;
        if cfg.k_out_in_sb {
            nisa::dma_copy(k_out, k_sb);
        } else {
            for b in 0..cfg.bs {
                nisa::dma_copy(k_out[s![b, 0, .., ..]], k_sb[s![.., b * s_a..(b + 1) * s_a]]);
            }
        }
    }

    /// The library's `_perform_rope` (or, without fused RoPE, the `qk_in_sb`
    /// inputs taken as they are): the queries of every batch `(d, bs·n)` in `q`'s dtype,
    /// scaled by `1/sqrt(d)` after RoPE, and the active keys `(d, bs·s_a)` in
    /// `k_active`'s dtype. Returns `(q_sb, k_active_sb)`.
    #[nki_helper]
    fn perform_rope(q: Hbm, k_active: Hbm, cfg: AttnTKGConfig, inv_freqs: Option<Hbm>, rope_pos_ids: Option<Hbm>) -> (Sbuf, Sbuf) {
        let (d, bs, q_head, s_a) = (cfg.d_head, cfg.bs, cfg.q_head, cfg.s_active);
        let q_sb = nl::ndarray([d, bs * q_head * s_a], q.dtype(), buffer = nl::sbuf);
        let k_sb = nl::ndarray([d, bs * s_a], k_active.dtype(), buffer = nl::sbuf);
        if let Some(inv) = inv_freqs {
            if let Some(pos) = rope_pos_ids {
                let (cos, sin): (Sbuf, Sbuf) = rope(inv, pos, d, bs * s_a);
                let q_rot = nl::ndarray([d, bs * q_head * s_a], q.dtype(), buffer = nl::sbuf);
                load_rotated(q_rot, q, cfg.qk_in_sb, cos, sin, q_head, s_a);
                nisa::activation(q_sb, nl::copy, q_rot, scale = 1.0 / (d as f64).sqrt());
                load_rotated(k_sb, k_active, cfg.qk_in_sb, cos, sin, 1, s_a);
            }
        } else {
            nisa::dma_copy(q_sb, q);
            nisa::dma_copy(k_sb, k_active);
        }
        (q_sb, k_sb)
    }

    /// Loads keys `[k0, k0 + cols)` of the batch (prior up to `split`, then the
    /// active keys) as columns of the `(d, cols)` tile `dst`; from a block cache
    /// block by block, at the table's block read at run time.
    #[nki_helper]
    fn load_keys(dst: Sbuf, atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, k0: i64, cols: i64) {
        let (d, split, s_a, b, bl) = (atp.d_head, atp.split, atp.s_active, bufs.batch_id, atp.block_len);
        let k_prior = io.k_prior;
        let prior_end = (k0 + cols).min(split);
        if prior_end > k0 && bl > 0 {
            for i in k0 / bl..(prior_end + bl - 1) / bl {
                let (j0, j1) = (k0.max(i * bl), prior_end.min((i + 1) * bl));
                let src = k_prior.ap(
                    [[1, d], [d, j1 - j0]],
                    offset = (j0 - i * bl) * d,
                    scalar_offset = bufs.blocks[s![.., i..i + 1]],
                    indirect_dim = 0,
                );
                nisa::dma_copy(dst[s![.., j0 - k0..j1 - k0]], src);
            }
        } else if prior_end > k0 {
            let n = prior_end - k0;
            if atp.tp_k_prior {
                // `(s_prior, d)` rows read transposed: partition = head dim, free = key.
                let s_full = k_prior.shape()[2];
                nisa::dma_copy(dst[s![.., 0..n]], k_prior.ap([[1, d], [d, n]], offset = (b * s_full + k0) * d));
            } else {
                nisa::dma_copy(dst[s![.., 0..n]], k_prior[s![b, 0, .., k0..prior_end]]);
            }
        }
        let a0 = k0.max(split);
        if k0 + cols > a0 {
            nisa::tensor_copy(dst[s![.., a0 - k0..cols]], io.k_active_sb[s![.., b * s_a + a0 - split..b * s_a + k0 + cols - split]]);
        }
    }

    /// Loads values `[k0, k0 + rows)` of the batch (prior up to `split`, then
    /// active) as rows of the `(P_MAX, d)` tile `dst`.
    #[nki_helper]
    fn load_values(dst: Sbuf, atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, k0: i64, rows: i64) {
        let (d, split, b, bl) = (atp.d_head, atp.split, bufs.batch_id, atp.block_len);
        let prior_end = (k0 + rows).min(split);
        if prior_end > k0 && bl > 0 {
            for i in k0 / bl..(prior_end + bl - 1) / bl {
                let (j0, j1) = (k0.max(i * bl), prior_end.min((i + 1) * bl));
                let src = io.v_prior.ap(
                    [[d, j1 - j0], [1, d]],
                    offset = (j0 - i * bl) * d,
                    scalar_offset = bufs.blocks[s![.., i..i + 1]],
                    indirect_dim = 0,
                );
                nisa::dma_copy(dst[s![j0 - k0..j1 - k0, ..]], src);
            }
        } else if prior_end > k0 {
            nisa::dma_copy(dst[s![0..prior_end - k0, ..]], io.v_prior[s![b, 0, k0..prior_end, ..]]);
        }
        let a0 = k0.max(split);
        if k0 + rows > a0 {
            nisa::dma_copy(dst[s![a0 - k0..rows, ..]], io.v_active[s![b, 0, a0 - split..k0 + rows - split, ..]]);
        }
    }

    /// One value per query column of heads `[head0, head0 + heads)` of batch
    /// `b` from a `(rows, s_stride·…)` table: the column of head `head0 + h`'s
    /// token `t`, `h·s_a + t`, takes `src[row, t·s_stride]` — the sink (`row`
    /// the head, stride 0) or a position id (`row = b`, stride 1 per token, 0
    /// for the first token's) — into the `(heads·s_a, 1)` fp32 column `dst`.
    #[nki_helper]
    fn query_column(dst: Sbuf, src: Hbm, head0: i64, heads: i64, s_a: i64, b: i64, per_head: bool, t_stride: i64) {
        let raw = nl::ndarray([heads * s_a, 1], src.dtype(), buffer = nl::sbuf);
        let row_len = src.shape()[1];
        for h in 0..heads {
            let row = if per_head { head0 + h } else { b };
            nisa::dma_copy(raw[s![h * s_a..(h + 1) * s_a, ..]], src.ap([[t_stride, s_a], [1, 1]], offset = row * row_len));
        }
        nisa::tensor_copy(dst, raw);
    }

    /// The library's `_allocate_fa_buffers`, `_load_position_ids` and `_prep_sink`
    /// for the query heads from `head0` (a group, see [`AttnTileParams`]) of
    /// batch `b`: the queries, the position columns, the running statistics
    /// started — the negated max at `-sink` (so the sum starts at
    /// `exp(sink - sink) = 1`) or at `+FLOAT32_MAX` (sum 0, and the first
    /// correction `exp(-inf) = 0`) — and the output at zero.
    #[nki_helper]
    fn allocate_fa_buffers(atp: AttnTileParams, io: AttnTensors, b: i64, head0: i64) -> AttnInternalBuffers {
        let (d, s_a) = (atp.d_head, atp.s_active);
        let heads = atp.group_heads.min(atp.q_head - head0);
        let (n, c0) = (heads * s_a, b * atp.n_cols + head0 * s_a);
        let q_sb = nl::ndarray([d, n], io.q_sb.dtype(), buffer = nl::sbuf);
        nisa::tensor_copy(q_sb, io.q_sb[s![.., c0..c0 + n]]);
        let (starts, ends) = (io.start_pos_ids, io.rope_pos_ids);
        let pos_end = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        let pos_start = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        if let Some(en) = ends {
            // A sliding window ends at each token's own position; else every token sees the first token's prefix.
            let per_token = if atp.window { 1 } else { 0 };
            query_column(pos_end, en, head0, heads, s_a, b, false, per_token);
        }
        if let Some(st) = starts {
            query_column(pos_start, st, head0, heads, s_a, b, false, 1);
        }
        let run_negmax = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        let run_sum = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        if let Some(sk) = io.sink {
            let sc = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
            query_column(sc, sk, head0, heads, s_a, b, true, 0);
            nisa::tensor_scalar(run_negmax, sc, nl::multiply, -1.0);
            nisa::memset(run_sum, 1.0);
        } else {
            nisa::memset(run_negmax, f32::MAX);
            nisa::memset(run_sum, 0.0);
        }
        let acc = nl::ndarray([n, d], nl::float32, buffer = nl::sbuf);
        nisa::memset(acc, 0.0);
        let table = io.active_blocks_table;
        let n_blocks = if atp.block_len > 0 { atp.curr_sprior / atp.block_len } else { 1 };
        let blocks = nl::ndarray([1, n_blocks], nl::int32, buffer = nl::sbuf);
        if let Some(t) = table {
            let raw = nl::ndarray([1, n_blocks], t.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(raw, t[s![b..b + 1, ..]]);
            nisa::tensor_copy(blocks, raw);
        }
        AttnInternalBuffers {
            batch_id: b,
            head0,
            cols: n,
            q_sb,
            blocks,
            pos_end,
            pos_start,
            running_negmax: run_negmax,
            running_sum: run_sum,
            acc,
        }
    }

    /// The library's `gen_mask_tkg` for keys `[k0, k0 + cols)` of one batch into
    /// `visible` `(n, MM1_KEYS)` uint8: the keys' indices along the free axis
    /// compared with each query column's positions by [`prior_mask`]. The active
    /// keys are overwritten by the caller.
    #[nki_helper]
    fn gen_mask_tkg(visible: Sbuf, bufs: AttnInternalBuffers, window: bool, k0: i64, cols: i64) {
        let n = visible.shape()[0];
        let keys = nl::ndarray([n, MM1_KEYS], nl::float32, buffer = nl::sbuf);
        nisa::iota(keys[s![.., 0..cols]], [[1, cols]], offset = k0);
        prior_mask(visible[s![.., 0..cols]], keys[s![.., 0..cols]], bufs.pos_start, bufs.pos_end, window);
    }

    /// The comparison of the library's `gen_mask_tkg` (shared with the standalone
    /// [`gen_mask_tkg_hbm`](crate::tkg::gen_mask_tkg::gen_mask_tkg_hbm)): `dst`, of
    /// `keys`' shape, is 1 where the key index `keys[p, j]` is visible to the query
    /// of partition `p` and 0 elsewhere. Key `k` is visible when `k < end[p]`, or
    /// with a sliding window when `start[p] <= k < end[p]` (`start <= end`) or
    /// `k >= start[p] or k < end[p]` (a window wrapping around the cache), the two
    /// window cases selected without a branch. `start` and `end` are `(P, 1)` fp32
    /// columns (`start` is not read without a window).
    #[nki_helper]
    pub fn prior_mask(dst: Sbuf, keys: Sbuf, start: Sbuf, end: Sbuf, window: bool) {
        if window {
            let shape = keys.shape();
            let ge = nl::ndarray(shape, nl::uint8, buffer = nl::sbuf);
            nisa::tensor_scalar(ge, keys, nl::greater_equal, start);
            let lt = nl::ndarray(shape, nl::uint8, buffer = nl::sbuf);
            nisa::tensor_scalar(lt, keys, nl::less, end);
            let wraps = nl::ndarray([shape[0], 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(wraps, start, end, nl::greater);
            let inside = nl::ndarray(shape, nl::uint8, buffer = nl::sbuf);
            nisa::tensor_tensor(inside, ge, lt, nl::multiply);
            // either = max(ge, lt) >= inside: add (either - inside) where the window wraps.
            nisa::tensor_tensor(ge, ge, lt, nl::maximum);
            nisa::tensor_tensor(ge, ge, inside, nl::subtract);
            nisa::tensor_scalar(ge, ge, nl::multiply, wraps);
            nisa::tensor_tensor(dst, inside, ge, nl::add);
        } else {
            nisa::tensor_scalar(dst, keys, nl::less, end);
        }
    }

    /// The library's `_load_mask` for keys `[k0, k0 + cols)` of the group's
    /// columns of batch `b`: `(group columns, MM1_KEYS)` uint8, nonzero where visible — from the mask input (for a
    /// block cache in the library's fold order), or generated from the positions
    /// with the active keys' block from the mask input.
    #[nki_helper]
    fn load_mask(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, k0: i64, cols: i64) -> Sbuf {
        let (n, gn, split) = (atp.n_cols, bufs.cols, atp.split);
        let mask = io.mask;
        let bs = mask.shape()[1];
        // The group's first column among the mask's (b, h, t) ones.
        let c0 = bufs.batch_id * n + bufs.head0 * atp.s_active;
        let visible = nl::ndarray([gn, MM1_KEYS], nl::uint8, buffer = nl::sbuf);
        // mask[key, b, h, t] for column p = h·s_a + t: partition stride 1, key stride bs·n.
        if atp.use_pos_id {
            gen_mask_tkg(visible, bufs, atp.window, k0, cols);
            let a0 = k0.max(split);
            if k0 + cols > a0 {
                let src = mask.ap([[1, gn], [bs * n, k0 + cols - a0]], offset = (a0 - split) * bs * n + c0);
                nisa::dma_copy(visible[s![.., a0 - k0..cols]], src);
            }
        } else if atp.fold_len > 1 {
            // Key k = fold start + p·fold_len + r sits at position fold start + r·P_MAX + p.
            let (fl, per) = (atp.fold_len, atp.shard_len);
            for row in 0..cols / fl {
                let k = k0 + row * fl;
                let fold = (k / per) * per + (k % per) / (P_MAX * fl) * (P_MAX * fl);
                let p = (k - fold) / fl;
                let src = mask.ap([[1, gn], [P_MAX * bs * n, fl]], offset = (fold + p) * bs * n + c0);
                nisa::dma_copy(visible[s![.., row * fl..(row + 1) * fl]], src);
            }
        } else {
            nisa::dma_copy(visible[s![.., 0..cols]], mask.ap([[1, gn], [bs * n, cols]], offset = k0 * bs * n + c0));
        }
        visible
    }

    /// The library's `_compute_qk_matmul` with `_load_mask`: the scores of the FA
    /// tile's keys, `(n, tile_len)` fp32, the raw `q·k` where the mask is nonzero and
    /// `FLOAT32_MIN` elsewhere, per `MM1_KEYS` keys.
    #[nki_helper]
    fn compute_qk_matmul(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, fa: FATileContext) -> Sbuf {
        let (d, n, width, f0) = (atp.d_head, bufs.cols, fa.tile_len, fa.tile_start);
        let masked = nl::ndarray([n, width], nl::float32, buffer = nl::sbuf);
        nisa::memset(masked, f32::MIN);
        for c in 0..(width + MM1_KEYS - 1) / MM1_KEYS {
            let c0 = c * MM1_KEYS;
            let cols = (width - c0).min(MM1_KEYS);
            let k_sb = nl::ndarray([d, MM1_KEYS], bufs.q_sb.dtype(), buffer = nl::sbuf);
            load_keys(k_sb, atp, io, bufs, f0 + c0, cols);
            let scores = nl::ndarray([n, MM1_KEYS], nl::float32, buffer = nl::psum);
            nisa::nc_matmul(scores[s![.., 0..cols]], bufs.q_sb, k_sb[s![.., 0..cols]]);
            let visible: Sbuf = load_mask(atp, io, bufs, f0 + c0, cols);
            nisa::tensor_copy_predicated(masked[s![.., c0..c0 + cols]], scores[s![.., 0..cols]], visible[s![.., 0..cols]]);
        }
        masked
    }

    /// The library's `_fa_update_running_max` and `_fa_update_correction_factor`: the
    /// tile's negated max merged into the running one, and the correction
    /// `exp(max_old - max_new)` of the state so far. Returns `(new_negmax, correction)`.
    #[nki_helper]
    fn fa_update_running_max(bufs: AttnInternalBuffers, masked: Sbuf) -> (Sbuf, Sbuf) {
        let n = bufs.cols;
        let tile_negmax = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(tile_negmax, nl::maximum, masked, 1, negate = true);
        let new_negmax = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(new_negmax, bufs.running_negmax, tile_negmax, nl::minimum);
        let corr = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(corr, new_negmax, bufs.running_negmax, nl::subtract);
        nisa::activation(corr, nl::exp, corr);
        (new_negmax, corr)
    }

    /// The library's `_compute_exp_qk`, `_cascaded_sum_reduction` and
    /// `_fa_update_running_sum`: `exp(s - max)` in `q`'s dtype, and the fp32 row
    /// sums of those rounded probabilities (the library sums the tile the PV
    /// matmul reads); the running sum corrected and increased by the tile's.
    /// Returns the probabilities, `(n, tile_len)`.
    #[nki_helper]
    fn compute_exp_qk(bufs: AttnInternalBuffers, fa: FATileContext, masked: Sbuf, new_negmax: Sbuf, corr: Sbuf) -> Sbuf {
        let (n, width) = (bufs.cols, fa.tile_len);
        let probs = nl::ndarray([n, width], bufs.q_sb.dtype(), buffer = nl::sbuf);
        nisa::activation(probs, nl::exp, masked, bias = new_negmax);
        let tile_sum = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(tile_sum, nl::add, probs, 1);
        let run_sum = bufs.running_sum;
        nisa::tensor_scalar(run_sum, run_sum, nl::multiply, corr);
        nisa::tensor_tensor(run_sum, run_sum, tile_sum, nl::add);
        probs
    }

    /// The library's `_compute_pv_matmul`: `Σ_j p[:, j] · v[j, :]` over the FA tile's
    /// keys, the probabilities PE-transposed per [`P_MAX`] keys and multiplied
    /// with the value rows, accumulated in PSUM per [`PV_GROUP_KEYS`] keys. Returns
    /// `(n, d)` fp32.
    #[nki_helper]
    fn compute_pv_matmul(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, fa: FATileContext, probs: Sbuf) -> Sbuf {
        let (n, d, width) = (bufs.cols, atp.d_head, fa.tile_len);
        let pv = nl::ndarray([n, d], nl::float32, buffer = nl::sbuf);
        nisa::memset(pv, 0.0);
        for g in 0..(width + PV_GROUP_KEYS - 1) / PV_GROUP_KEYS {
            let acc = nl::ndarray([n, d], nl::float32, buffer = nl::psum);
            let g0 = g * PV_GROUP_KEYS;
            let keys = (width - g0).min(PV_GROUP_KEYS);
            for v in 0..(keys + P_MAX - 1) / P_MAX {
                let c0 = g0 + v * P_MAX;
                let rows = (width - c0).min(P_MAX);
                let flipped = nl::ndarray([P_MAX, n], probs.dtype(), buffer = nl::psum);
                nisa::nc_transpose(flipped[s![0..rows, ..]], probs[s![.., c0..c0 + rows]]);
                let p_t = nl::ndarray([P_MAX, n], probs.dtype(), buffer = nl::sbuf);
                nisa::tensor_copy(p_t[s![0..rows, ..]], flipped[s![0..rows, ..]]);
                let v_sb = nl::ndarray([P_MAX, d], probs.dtype(), buffer = nl::sbuf);
                load_values(v_sb, atp, io, bufs, fa.tile_start + c0, rows);
                nisa::nc_matmul(acc, p_t[s![0..rows, ..]], v_sb[s![0..rows, ..]]);
            }
            nisa::tensor_tensor(pv, pv, acc, nl::add);
        }
        pv
    }

    /// The library's `_fa_accumulate_output`: the output so far times the correction
    /// plus this tile's PV; the tile's max becomes the running one.
    #[nki_helper]
    fn fa_accumulate_output(bufs: AttnInternalBuffers, pv: Sbuf, new_negmax: Sbuf, corr: Sbuf) {
        nisa::tensor_scalar(bufs.acc, bufs.acc, nl::multiply, corr);
        nisa::tensor_tensor(bufs.acc, bufs.acc, pv, nl::add);
        nisa::tensor_copy(bufs.running_negmax, new_negmax);
    }

    /// The library's `_fa_finalize_and_store`: the output divided by the running
    /// sum; the group's column `p = h·s_a + t` of batch `b` (head `head0 + h`)
    /// stored as `out[b, head0 + h, :, t]`, or as column `b·n + head0·s_a + p` of
    /// `out` `(d, bs·n)` with `out_in_sb`.
    #[nki_helper]
    fn fa_finalize_and_store(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers) {
        let (n, d, s_a, q_head, b, h0) = (bufs.cols, atp.d_head, atp.s_active, atp.q_head, bufs.batch_id, bufs.head0);
        let out = io.out;
        let recip = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::reciprocal(recip, bufs.running_sum);
        let o_sb = nl::ndarray([n, d], out.dtype(), buffer = nl::sbuf);
        nisa::tensor_scalar(o_sb, bufs.acc, nl::multiply, recip);
        if atp.out_in_sb {
            let cols = out.shape()[1];
            nisa::dma_copy(out.ap([[1, n], [cols, d]], offset = b * atp.n_cols + h0 * s_a), o_sb);
        } else {
            for h in 0..n / s_a {
                let head = b * q_head + h0 + h;
                nisa::dma_copy(out.ap([[1, s_a], [s_a, d]], offset = head * d * s_a), o_sb[s![h * s_a..(h + 1) * s_a, ..]]);
            }
        }
    }

    /// Decode attention of batch `b`: its query heads a group at a time (as many
    /// whole heads as the partitions hold; the library tiles its columns by
    /// 128 the same way), each group's flash-attention loop over the cache.
    #[nki_helper]
    fn attention_tkg_batch(atp: AttnTileParams, io: AttnTensors, b: i64) {
        for g in 0..(atp.q_head + atp.group_heads - 1) / atp.group_heads {
            attention_tkg_group(atp, io, b, g * atp.group_heads);
        }
    }

    /// Decode attention of the query heads from `head0` (one group) of batch
    /// `b`: the flash-attention loop over the cache, one [`FATileContext`] of at
    /// most `fa_tile` keys at a time, then the normalised output.
    #[nki_helper]
    fn attention_tkg_group(atp: AttnTileParams, io: AttnTensors, b: i64, head0: i64) {
        let (s_kv, fa_tile) = (atp.curr_sprior, atp.fa_tile);
        let bufs: AttnInternalBuffers = allocate_fa_buffers(atp, io, b, head0);
        for f in 0..(s_kv + fa_tile - 1) / fa_tile {
            let f0 = f * fa_tile;
            let fa = FATileContext { tile_start: f0, tile_len: (s_kv - f0).min(fa_tile) };
            let masked: Sbuf = compute_qk_matmul(atp, io, bufs, fa);
            let (new_negmax, corr): (Sbuf, Sbuf) = fa_update_running_max(bufs, masked);
            let probs: Sbuf = compute_exp_qk(bufs, fa, masked, new_negmax, corr);
            let pv: Sbuf = compute_pv_matmul(atp, io, bufs, fa, probs);
            fa_accumulate_output(bufs, pv, new_negmax, corr);
        }
        fa_finalize_and_store(atp, io, bufs);
    }

    /// The greatest common divisor of two positive sizes.
    #[nki_helper]
    fn gcd(a: i64, b: i64) -> i64 {
        let mut g = 1;
        for r in 1..a.min(b) + 1 {
            if a % r == 0 && b % r == 0 {
                g = r;
            }
        }
        g
    }

    /// The library's `is_batch_sharded`: with two LNC programs the batches are
    /// split between them (rather than `s_prior`) when the batch splits evenly and
    /// either its query columns exceed the partitions or `s_prior` is too short to split.
    #[nki_helper]
    pub fn is_batch_sharded(bs: i64, q_head: i64, s_active: i64, curr_sprior: i64) -> bool {
        bs % 2 == 0 && (bs * q_head * s_active > P_MAX || curr_sprior < 2 * P_MAX)
    }

    /// The layout of a block cache's mask (the library's
    /// `resize_cache_block_len_for_attention_tkg_kernel` and LNC sharding): the
    /// reduced block length, a divisor of `block_len` so that each core's keys —
    /// all of them, split in two when LNC2 shards `s_prior` — and its
    /// flash-attention tiles (`fa_tiling`) are whole folds of `P_MAX` blocks; and the keys per
    /// core. Returns `(fold_len, shard_len)`, `(1, curr_sprior)` for a flat cache
    /// without s_prior sharding. The caller checks that `curr_sprior` is whole
    /// folds of each core.
    #[nki_helper]
    pub fn mask_folds(bs: i64, q_head: i64, s_active: i64, sp: i64, block_len: i64, fa_tiling: bool, programs: i64) -> (i64, i64) {
        let split = programs > 1 && !is_batch_sharded(bs, q_head, s_active, sp) && sp >= 2 * P_MAX;
        let shards = if split { programs } else { 1 };
        let per = sp / shards;
        let mut fold_len = 1;
        if block_len > 0 {
            let mut div = per / P_MAX;
            if fa_tiling && per > FA_TILE_SIZE {
                div = gcd(div, FA_TILE_SIZE / P_MAX);
                if per % FA_TILE_SIZE > 0 {
                    div = gcd(div, per % FA_TILE_SIZE / P_MAX);
                }
            }
            fold_len = gcd(block_len, div);
        }
        (fold_len, per)
    }

    /// The library's `AttnTKGConfig` asserts, and the rules of what this kernel
    /// implements; returns the keys per flash-attention tile.
    #[nki_helper]
    fn check_config(cfg: AttnTKGConfig) -> i64 {
        let (bs, q_head, s_active, d_head) = (cfg.bs, cfg.q_head, cfg.s_active, cfg.d_head);
        let (curr_sprior, full_sprior, block_len) = (cfg.curr_sprior, cfg.full_sprior, cfg.block_len);
        assert!(block_len == 0 || (cfg.tp_k_prior && cfg.qk_in_sb && curr_sprior % block_len == 0), BLOCK_KV);
        assert!(0 < bs, "Batch size must be strictly positive, got bs={bs}.");
        assert!(0 < q_head, "Number of Q heads must be strictly positive, got q_head={q_head}.");
        assert!(0 < s_active, "Number of decode tokens must be strictly positive, got s_active={s_active}.");
        assert!(
            0 < curr_sprior && curr_sprior <= full_sprior,
            "curr_sprior must be <= full_sprior. Got curr_sprior={curr_sprior}, full_sprior={full_sprior}."
        );
        assert!(0 < d_head && d_head <= P_MAX, "Unsupported d_head. Got d_head={d_head}, must be between 1 and {P_MAX}, inclusive.");
        assert!(curr_sprior % P_MAX == 0, "s_prior must be divisible by p_max. Got curr_sprior={curr_sprior}, p_max={P_MAX}.");
        assert!(s_active <= P_MAX, "s_active must fit the {P_MAX} partitions (a query head's columns), got s_active={s_active}.");
        assert!(cfg.qk_in_sb || cfg.fuse_rope, QK_LAYOUT);
        assert!(!cfg.fuse_rope || d_head % 2 == 0, ROPE_HEAD_EVEN);
        assert!(!cfg.fuse_rope || curr_sprior <= MAX_SPRIOR_ROPE, ROPE_SPRIOR);
        let fa_tile = if cfg.enable_fa_s_prior_tiling { FA_TILE_SIZE } else { curr_sprior };
        let last_tile = curr_sprior - (curr_sprior - 1) / fa_tile * fa_tile;
        assert!(last_tile >= s_active, "Last FA tile size ({last_tile}) must be >= s_active ({s_active})");
        fa_tile
    }

    /// The shapes of the tensors `cfg` describes.
    #[nki_helper]
    fn check_shapes(cfg: AttnTKGConfig, q: Hbm, k_active: Hbm, v_active: Hbm, k_prior: Hbm, v_prior: Hbm, mask: Hbm) {
        let (bs, q_head, s_active, d_head) = (cfg.bs, cfg.q_head, cfg.s_active, cfg.d_head);
        let (full_sprior, tp_k_prior) = (cfg.full_sprior, cfg.tp_k_prior);
        let n = q_head * s_active;
        let q_shape = q.shape();
        if cfg.qk_in_sb {
            assert!(
                q.ndim() == 2 && q_shape[0] == d_head && q_shape[1] == bs * n,
                "q must be (d_head, bs * q_head * s_active) with qk_in_sb, got {q_shape}"
            );
            let ka_shape = k_active.shape();
            assert!(
                k_active.ndim() == 2 && ka_shape[0] == d_head && ka_shape[1] == bs * s_active,
                "k_active must be (d_head, bs * s_active) with qk_in_sb, got {ka_shape}"
            );
        } else {
            assert!(
                q.ndim() == 4 && q_shape[0] == bs && q_shape[1] == q_head && q_shape[2] == s_active && q_shape[3] == d_head,
                "q must be (bs, q_head, s_active, d_head), got {q_shape}"
            );
            let ka_shape = k_active.shape();
            assert!(
                k_active.ndim() == 4 && ka_shape[0] == bs && ka_shape[1] == 1 && ka_shape[2] == s_active && ka_shape[3] == d_head,
                "k_active must be (bs, 1, s_active, d_head), got {ka_shape}"
            );
        }
        let va_shape = v_active.shape();
        assert!(
            v_active.ndim() == 4 && va_shape[0] == bs && va_shape[1] == 1 && va_shape[2] == s_active && va_shape[3] == d_head,
            "v_active must be (bs, 1, s_active, d_head), got {va_shape}"
        );
        let kp_shape = k_prior.shape();
        let vp_shape = v_prior.shape();
        let bl = cfg.block_len;
        if bl > 0 {
            assert!(
                k_prior.ndim() == 3 && kp_shape[1] == bl && kp_shape[2] == d_head,
                "k_prior must be (blocks, block_len, d_head), got {kp_shape}"
            );
            assert!(
                v_prior.ndim() == 3 && vp_shape[1] == bl && vp_shape[2] == d_head,
                "v_prior must be (blocks, block_len, d_head), got {vp_shape}"
            );
        } else {
            let kp_seq = if tp_k_prior { kp_shape[2] } else { kp_shape[3] };
            let kp_d = if tp_k_prior { kp_shape[3] } else { kp_shape[2] };
            assert!(
                k_prior.ndim() == 4 && kp_shape[0] >= bs && kp_shape[1] == 1 && kp_seq == full_sprior && kp_d == d_head,
                "k_prior must be (B+, 1, d_head, full_sprior), or (B+, 1, full_sprior, d_head) with tp_k_prior, got {kp_shape}"
            );
            assert!(
                v_prior.ndim() == 4 && vp_shape[0] >= bs && vp_shape[1] == 1 && vp_shape[2] == full_sprior && vp_shape[3] == d_head,
                "v_prior must be (B+, 1, full_sprior, d_head), got {vp_shape}"
            );
        }
        let m_shape = mask.shape();
        let m_keys = if cfg.use_pos_id { s_active } else { cfg.curr_sprior };
        assert!(
            mask.ndim() == 4 && m_shape[0] == m_keys && m_shape[1] == bs && m_shape[2] == q_head && m_shape[3] == s_active,
            "mask must be (curr_sprior, bs, q_head, s_active), or (s_active, bs, q_head, s_active) with use_pos_id, got {m_shape}"
        );
        assert!(mask.dtype() == nl::uint8, "mask must be uint8 (nonzero: visible)");
    }

    /// The library's fp8 KV cache rules: `k_prior`, `v_prior`, `k_active` and
    /// `v_active` all `float8_e4m3` or none, and with them `q` not float32, no
    /// fused RoPE and the `qk_in_sb` layouts.
    #[nki_helper]
    fn check_fp8_kv(cfg: AttnTKGConfig, q: Hbm, k_active: Hbm, v_active: Hbm, k_prior: Hbm, v_prior: Hbm) {
        let fp8 = nl::float8_e4m3;
        let count = (k_prior.dtype() == fp8) as i64
            + (v_prior.dtype() == fp8) as i64
            + (k_active.dtype() == fp8) as i64
            + (v_active.dtype() == fp8) as i64;
        assert!(count == 0 || count == 4, FP8_KV_ALL);
        let fp8_kv = count == 4;
        assert!(!fp8_kv || (q.dtype() != nl::float32 && !cfg.fuse_rope && cfg.qk_in_sb), FP8_KV_QUERY);
        assert!(fp8_kv || q.dtype() != fp8, FP8_KV_ALL);
    }

    /// The optional inputs: present exactly when `cfg` uses them, and their shapes.
    #[nki_helper]
    fn check_optional(
        cfg: AttnTKGConfig,
        inv_freqs: Option<Hbm>,
        rope_pos_ids: Option<Hbm>,
        start_pos_ids: Option<Hbm>,
        sink: Option<Hbm>,
        table: Option<Hbm>,
    ) {
        let (bs, s_active, q_head, d_head) = (cfg.bs, cfg.s_active, cfg.q_head, cfg.d_head);
        assert!(inv_freqs.is_some() == cfg.fuse_rope, "inv_freqs (d_head // 2, 1) must be given exactly when cfg.fuse_rope=True");
        if let Some(inv) = inv_freqs {
            let shape = inv.shape();
            assert!(inv.ndim() == 2 && shape[0] == d_head / 2 && shape[1] == 1, "inv_freqs must be (d_head // 2, 1), got {shape}");
        }
        let needs_pos = cfg.fuse_rope || cfg.use_pos_id;
        assert!(
            rope_pos_ids.is_some() == needs_pos,
            "rope_pos_ids (bs, s_active) must be given exactly when cfg.fuse_rope or cfg.use_pos_id"
        );
        assert!(start_pos_ids.is_none() || cfg.use_pos_id, WINDOW_NEEDS_POS_ID);
        if let Some(t) = rope_pos_ids {
            let shape = t.shape();
            assert!(t.ndim() == 2 && shape[0] == bs && shape[1] == s_active, "rope_pos_ids must be (bs, s_active), got {shape}");
        }
        if let Some(t) = start_pos_ids {
            let shape = t.shape();
            assert!(t.ndim() == 2 && shape[0] == bs && shape[1] == s_active, "start_pos_ids must be (bs, s_active), got {shape}");
        }
        assert!(table.is_some() == (cfg.block_len > 0), BLOCK_KV);
        if let Some(t) = table {
            let shape = t.shape();
            let blocks = cfg.curr_sprior / cfg.block_len;
            assert!(
                t.ndim() == 2 && shape[0] == bs && shape[1] == blocks,
                "active_blocks_table must be (bs, curr_sprior / block_len), got {shape}"
            );
        }
        if let Some(sk) = sink {
            let sk_shape = sk.shape();
            assert!(sk.ndim() == 2 && sk_shape[0] == q_head && sk_shape[1] == 1, "sink must be (q_head, 1), got {sk_shape}");
        }
    }

    /// The configuration a fused decode block hands `attention_tkg` (the
    /// library's `attention_block_tkg`): queries, active keys and (for a
    /// following projection) the output in the SBUF layouts, no fused RoPE or
    /// position ids; `k_cache_transposed` is the cache's layout (the kernel
    /// transposes a cache that is not). A caller outside this crate builds the
    /// bundle through this helper.
    #[nki_helper]
    pub fn attention_block_config(
        bs: i64,
        q_head: i64,
        s_active: i64,
        curr_sprior: i64,
        full_sprior: i64,
        d_head: i64,
        block_len: i64,
        k_cache_transposed: bool,
        out_in_sb: bool,
        enable_fa_s_prior_tiling: bool,
    ) -> AttnTKGConfig {
        AttnTKGConfig {
            bs,
            q_head,
            s_active,
            curr_sprior,
            full_sprior,
            d_head,
            block_len,
            tp_k_prior: !k_cache_transposed,
            strided_mm1: block_len == 0,
            use_pos_id: false,
            fuse_rope: false,
            use_gpsimd_sb2sb: true,
            qk_in_sb: true,
            k_out_in_sb: false,
            out_in_sb,
            enable_fa_s_prior_tiling,
        }
    }

    /// Token-generation attention over a flat KV cache: the library's
    /// `attention_tkg` with its `AttnTKGConfig` bundle, fused RoPE, in-kernel masks
    /// from position ids (with a per-query sliding window) and every tensor
    /// layout; a block KV cache is refused by name.
    ///
    /// `q` is `(d, bs·q_head·s_active)` (column `(b·q_head + h)·s_active + t`) and
    /// `k_active` `(d, bs·s_active)` with `cfg.qk_in_sb`, else `(bs, q_head,
    /// s_active, d)` and `(bs, 1, s_active, d)` (fused RoPE only); `v_active`
    /// `(bs, 1, s_active, d)`, `k_prior` `(B+, 1, d, full_sprior)` (or
    /// `(B+, 1, full_sprior, d)` with `cfg.tp_k_prior`), `v_prior` `(B+, 1, full_sprior, d)`,
    /// `mask` uint8 `(curr_sprior, bs, q_head, s_active)` (its last `s_active` keys
    /// only with `cfg.use_pos_id`), `inv_freqs` `(d/2, 1)`, `rope_pos_ids` and
    /// `start_pos_ids` `(bs, s_active)`, `sink` `(q_head, 1)`. With fused RoPE `q`
    /// is scaled by `1/sqrt(d)`, else it comes scaled.
    ///
    /// Returns `(out, k_out)` in `q`'s and `k_active`'s dtypes: `out`
    /// `(bs, q_head, d, s_active)` (`(d, bs·q_head·s_active)` with `cfg.out_in_sb`) and
    /// the active keys attended to (after RoPE when fused) `(bs, 1, d, s_active)`
    /// (`(d, bs·s_active)` with `cfg.k_out_in_sb`). The library's caller-allocated
    /// `out` / `k_out` and its `sbm` SBUF allocator have no counterpart: the kernel
    /// allocates its outputs and tiles.
    #[nki_kernel]
    pub fn attention_tkg(
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] q: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] k_active: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] v_active: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] k_prior: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] v_prior: Hbm,
        #[dtypes(uint8)] mask: Hbm,
        cfg: AttnTKGConfig,
        #[dtypes(float32)] inv_freqs: Option<Hbm>,
        #[dtypes(int32, float32)] rope_pos_ids: Option<Hbm>,
        #[dtypes(int32, float32)] start_pos_ids: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] sink: Option<Hbm>,
        #[dtypes(int32, uint32)] active_blocks_table: Option<Hbm>,
    ) -> (Hbm, Hbm) {
        let fa_tile = check_config(cfg);
        check_shapes(cfg, q, k_active, v_active, k_prior, v_prior, mask);
        check_optional(cfg, inv_freqs, rope_pos_ids, start_pos_ids, sink, active_blocks_table);
        check_fp8_kv(cfg, q, k_active, v_active, k_prior, v_prior);
        // The library's callers take an fp8 query's output in bfloat16.
        let out_dtype = if q.dtype() == nl::float8_e4m3 { nl::bfloat16 } else { q.dtype() };
        let (bs, q_head, s_active, d_head) = (cfg.bs, cfg.q_head, cfg.s_active, cfg.d_head);
        let n = q_head * s_active;
        let out = if cfg.out_in_sb {
            nl::ndarray([d_head, bs * n], out_dtype, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bs, q_head, d_head, s_active], out_dtype, buffer = nl::shared_hbm)
        };
        let k_out = if cfg.k_out_in_sb {
            nl::ndarray([d_head, bs * s_active], k_active.dtype(), buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bs, 1, d_head, s_active], k_active.dtype(), buffer = nl::shared_hbm)
        };
        // LNC sharding: whole batches, alternating between the programs.
        let grid = nl::program_ndim() == 1;
        let shard = if grid { nl::program_id(0) } else { 0 };
        let shards = if grid { nl::num_programs(0) } else { 1 };
        let (q_sb, k_active_sb): (Sbuf, Sbuf) = perform_rope(q, k_active, cfg, inv_freqs, rope_pos_ids);
        if shard == 0 {
            store_k_out(k_out, k_active_sb, cfg);
        }
        let io = AttnTensors {
            q_sb,
            k_active_sb,
            v_active,
            k_prior,
            v_prior,
            mask,
            rope_pos_ids,
            start_pos_ids,
            sink,
            active_blocks_table,
            out,
        };
        let sp = cfg.curr_sprior;
        let (fold_len, shard_len): (i64, i64) = mask_folds(bs, q_head, s_active, sp, cfg.block_len, cfg.enable_fa_s_prior_tiling, shards);
        assert!(cfg.block_len == 0 || (sp % (sp / shard_len * P_MAX) == 0 && MM1_KEYS % fold_len == 0), BLOCK_FOLDS);
        let atp = AttnTileParams {
            q_head,
            s_active,
            curr_sprior: cfg.curr_sprior,
            d_head,
            n_cols: n,
            group_heads: q_head.min(P_MAX / s_active),
            split: cfg.curr_sprior - s_active,
            fa_tile,
            block_len: cfg.block_len,
            fold_len,
            shard_len,
            tp_k_prior: cfg.tp_k_prior,
            use_pos_id: cfg.use_pos_id,
            window: start_pos_ids.is_some(),
            out_in_sb: cfg.out_in_sb,
        };
        for b in (shard..bs).step_by(shards) {
            attention_tkg_batch(atp, io, b);
        }
        (out, k_out)
    }
}
