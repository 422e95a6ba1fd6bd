//! The NKI library's `attention_block_tkg`: a decode-phase attention block,
//! from the hidden states to the attention output (optionally projected),
//! with the KV-cache update.
//!
//! ```text
//! QKV      = qkv(X, W_qkv, RMSNorm(gamma) if rmsnorm_X_enabled, + bias_qkv)   [B·S, (q_heads + 2)·d]
//! Q, K     = each head of QKV transposed to [d, B·heads·S]
//! Q, K     = RMSNorm over d (pre RoPE), RoPE(cos, sin), RMSNorm over d (post RoPE)
//! V        = the last d columns of QKV                                        [B, 1, S, d]
//! Q, K, V  = Q gathered over the KVDP ranks, this rank's B/KVDP batches       (KVDP > 1)
//! out      = attention_tkg(Q · softmax_scale, K, V, K_cache, V_cache, mask, sink)
//! out      = out gathered over the ranks, this rank's q_heads heads           (KVDP > 1)
//! caches   = K, V written at kv_cache_update_idx[b] .. + S   (update_cache; a
//!            position of batch b's rows, or a slot of the block pool)
//! out      = out @ W_out + bias_out                                            (W_out given)
//! ```
//!
//! Each phase is the ported kernel: [`qkv`](crate::qkv::qkv) (the fused
//! norm, bias and static fp8 of the projection), [`RoPE`] (head dim on the
//! partitions), `attention_tkg` of `nki-attention` (queries and active keys
//! in its SBUF layouts, the cache flat, transposed or in blocks) and
//! [`output_projection_tkg`]. The block's own phases are the ones the
//! library writes inline: the head transposes, the Q/K RMSNorm over the head
//! dim (`d_head = 128`: the sum of squares is one matmul with a ones matrix,
//! which sums over the partitions), the query scaling and the cache update
//! (one DMA per batch at the write position read on the device:
//! `scalar_offset`). A flat cache is written at a position of the batch's
//! own rows; a block cache (`[blocks, block_len, d]`, read through
//! `active_blocks_table`) is one pool of `blocks · block_len` slots and
//! `kv_cache_update_idx[b]` the slot of batch `b`'s first new token (its
//! block times `block_len` plus the offset in it), the `S` tokens going to
//! consecutive slots; a slot outside the pool is skipped, so `uint32` max
//! marks a padding batch. Loop structure: the token rows in tiles of whole batches,
//! `floor(128 / S)` batches a tile (the library's batch tiling; one tile when
//! `B·S <= 128`), each tile's projection rows loaded, its Q and K processed
//! and its columns stored; the transposes loop over the heads, the RMSNorm
//! over 512-column chunks; the attention and the output projection take all
//! batches (they tile them themselves); the cache update loops over the
//! tiles, then each tile's batches.
//!
//! fp8 KV-cache quantization (`k_scale` and `v_scale` given, the caches in
//! `float8_e4m3`): each tile's new keys (head dim on the partitions) and
//! values (tokens on the partitions) are multiplied by their scale in fp32,
//! clipped to `±240` and rounded to `float8_e4m3` (`quantize_to_fp8`); the
//! attention reads them and the fp8 caches as they are (the scales are not
//! divided out), and they are what the cache update writes or the kernel
//! returns. The cache update transposes fp8 keys through bfloat16 (exact).
//!
//! KV data parallelism (`KVDP > 1`, the library's `is_KVDP`): the `KVDP`
//! ranks of `KVDP_replica_group` each hold the caches of `B_attn = B / KVDP`
//! batches (rank `r` the batches from `r · B_attn`) and project their own
//! `q_heads` query heads (and the one shared K/V head) for all `B` batches;
//! the caches, `active_blocks_table` and `kv_cache_update_idx` are the
//! rank's, the mask `[S_ctx, B_attn, q_heads · KVDP, S]`, `cos` / `sin` and
//! the output of all `B` batches. Before the attention
//! (`kvdp_attention_input_collectives`) the queries are all-gathered over
//! the group (head `r · q_heads + h` of the gathered `q_heads_attn = q_heads
//! · KVDP` is rank `r`'s head `h`) and the rank's `B_attn` batches of the
//! queries and of the new keys and values are selected by its `ncc.rank_id`
//! (a register: the slice starts at a `scalar_offset`); the attention runs
//! on `B_attn` batches with `q_heads_attn` heads. After it
//! (`kvdp_attention_output_collectives`) its output is all-gathered over the
//! batches and the rank's own heads are selected, so the output projection
//! takes `[d, B·q_heads·S]` and the rank's output is its own heads' part of
//! every batch (with `W_out` the rank's `q_heads · d` rows of the
//! projection). The cache update writes the rank's batches. The
//! collectives gather an HBM tensor's first dim, so the queries are
//! transposed to head-major rows `[q_heads, B, S, d]` before their gather
//! (one query head needs no transpose: its `d` rows are gathered as they
//! are) and the attention's output to batch-major rows `[B_attn,
//! q_heads_attn, S, d]`, each transposed back afterwards (PE transposes of
//! 128 rows). The queries are scaled before their gather (the library
//! scales the gathered ones: the same values). As in the library the rank
//! id is the rank's in the launch, so the group is ranks `0 .. KVDP` in
//! order.
//!
//! The library keeps the phases' tensors in SBUF; here the kernels exchange
//! HBM tensors (the values are the same). On an LNC2 launch every program
//! runs the projection-free phases on all rows (into its own HBM scratch),
//! the phases' kernels split their work as they do alone, and the programs
//! meet at a core barrier after the projection and after the attention,
//! whose outputs they share. The V cache is written by program 0 and the K
//! cache by the last program, as in the library. Under KV data parallelism
//! every program gathers with the same program of the other ranks, into its
//! own HBM scratch.
//!
//! Refused by name (see [`AttnBlockRule`]): `X` in SBUF and `out_in_sb`
//! (a calling kernel's SBUF operands: here results are in HBM);
//! `skip_attention` with more than one tile of token rows is refused as by
//! the library, and so are `KVDP > 1` without `KVDP_replica_group` and a
//! `B` that is not a multiple of `KVDP`, and one of `k_scale` / `v_scale`
//! without the other (the library then quantizes nothing). The
//! library's `sbm` SBUF allocator has no counterpart (tiles are placed by
//! the compiler).

// The library's parameter names (`X`, `W_qkv`, `K_cache`, ...) keep their spelling.
#![allow(non_snake_case)]

use nki_attention::tkg::{TkgConfig, TkgDims, TkgRule};

pub use kernel::*;

/// The entry and its phases.
#[nki::nki_module]
pub mod kernel {
    use crate::output_projection::output_projection_tkg::output_projection_tkg;
    use crate::qkv::qkv::qkv;
    use crate::qkv::qkv_cte::qkv_cte_constants::FP8_E4M3_MAX;
    pub use crate::utils::common_types::{NormType, QKVOutputLayout, QuantizationType};
    use nki::ncc::ReplicaGroup;
    use nki::prelude::*;
    use nki_attention::tkg::attention_tkg::{attention_block_config, attention_tkg};

    /// Partitions: the most token rows, and the head dim the Q/K RMSNorm takes.
    pub const PMAX: i64 = nl::tile_size::pmax;
    /// The most fp32 columns of one PSUM bank (one matmul's moving free size).
    pub const PSUM_FMAX: i64 = nl::tile_size::psum_fmax;
    /// The block's one KV head (grouped-query attention).
    pub const KV_HEADS: i64 = 1;
    /// `rmsnorm_X_eps` when `None`.
    pub const DEFAULT_RMSNORM_X_EPS: f64 = 1e-3;

    /// `H` must be a positive multiple of 128.
    pub const HIDDEN: &str = "attention_block_tkg: H must be a positive multiple of 128";
    /// `skip_attention` with more than one tile of token rows.
    pub const SKIP_ATTENTION_TILES: &str =
        "attention_block_tkg: skip_attention needs B * S_tkg <= 128 (one tile of token rows), as in the library";
    /// Even head dim, `W_qkv` of `(q_heads + 2) · d` columns.
    pub const HEADS: &str = "attention_block_tkg: d_head must be even and W_qkv must hold (q_heads + 2) * d_head columns, q_heads >= 1";
    /// `out_in_sb` refused.
    pub const OUT_IN_SB: &str = "attention_block_tkg: out_in_sb=True leaves the output in SBUF for a calling kernel; the port's phases exchange HBM tensors, so the output is in HBM";
    /// KV data parallelism needs the ranks it gathers over.
    pub const KVDP_GROUP: &str = "attention_block_tkg: KVDP_replica_group is required when KVDP > 1";
    /// KV data parallelism splits the batches evenly over the ranks.
    pub const KVDP_BATCH: &str = "attention_block_tkg: B must be divisible by KVDP (each rank attends B / KVDP batches)";
    /// The fp8 KV-cache scales together.
    pub const KV_SCALES: &str = "attention_block_tkg: k_scale and v_scale must be given together (fp8 KV-cache quantization) or not at all";
    /// The fp8 KV-cache quantization's caches.
    pub const KV_QUANT_CACHE: &str =
        "attention_block_tkg: fp8 KV-cache quantization (k_scale, v_scale) needs K_cache and V_cache in float8_e4m3";
    /// The fp8 KV-cache scales' shapes.
    pub const KV_SCALE_SHAPE: &str = "attention_block_tkg: k_scale and v_scale must be [128, 1] or [1, 1] (one value)";
    /// `transposed_out` needs the projection.
    pub const TRANSPOSED_OUT: &str = "attention_block_tkg: transposed_out requires the output projection (W_out)";
    /// RoPE's tables together.
    pub const ROPE_TABLES: &str = "attention_block_tkg: cos and sin must be given together";
    /// RoPE's head dims.
    pub const ROPE_HEAD: &str = "attention_block_tkg: RoPE needs d_head 64 or 128";
    /// The Q/K RMSNorm's head dim.
    pub const QK_NORM_HEAD: &str = "attention_block_tkg: the Q/K RMSNorm needs d_head = 128 (one partition per element of a head)";
    /// A block cache is not transposed.
    pub const BLOCK_TRANSPOSED: &str = "attention_block_tkg: a block KV cache cannot be K_cache_transposed";
    /// The cache update's inputs.
    pub const UPDATE: &str = "attention_block_tkg: update_cache needs kv_cache_update_idx [B, 1] (the write positions)";

    /// The block's sizes.
    #[nki_object]
    pub struct AttnBlockDims {
        /// Batch size `B`.
        pub b: i64,
        /// New tokens per sequence `S_tkg`.
        pub s_tkg: i64,
        /// Head dimension `d`.
        pub d_head: i64,
        /// Query heads.
        pub q_heads: i64,
        /// Cache positions the attention reads (`S_ctx`).
        pub s_ctx: i64,
        /// Cache capacity (`S_max_ctx`).
        pub s_max_ctx: i64,
        /// Block length of a block cache, 0 for a flat one.
        pub block_len: i64,
        /// The programs of the launch (1 or 2).
        pub programs: i64,
        /// Batches per tile of token rows: `floor(128 / S_tkg)`, at most `B`.
        pub tile_b: i64,
        /// The ranks sharing the batches (`KVDP`; 1 without KV data parallelism).
        pub kvdp: i64,
    }

    /// The RMSNorm of `X` before the projection (the library's "rmsnorm X"
    /// arguments, `rmsnorm_X_*` in the signature).
    #[nki_object]
    pub struct RmsNormX {
        /// Whether it is applied.
        pub enabled: bool,
        /// Its epsilon (`DEFAULT_RMSNORM_X_EPS` when `None`).
        pub eps: Option<f64>,
        /// Its gamma `[1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gamma: Option<Hbm>,
    }

    /// The fused QKV projection's arguments (the library's "qkv projections").
    #[nki_object]
    pub struct QkvProjection {
        /// Weights `[H, (q_heads + 2)·d]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3)]
        pub W_qkv: Hbm,
        /// Bias `[1, (q_heads + 2)·d]`.
        #[dtypes(float32, bfloat16, float16)]
        pub bias_qkv: Option<Hbm>,
        /// The weights' quantization.
        pub quantization_type_qkv: QuantizationType,
        /// The fp8 weights' dequantization scale.
        #[dtypes(float32)]
        pub weight_dequant_scale_qkv: Option<Hbm>,
        /// The activations' dequantization scale.
        #[dtypes(float32)]
        pub input_dequant_scale_qkv: Option<Hbm>,
    }

    /// One RMSNorm of Q and K over the head dim (before RoPE,
    /// `rmsnorm_QK_pre_rope_*` in the signature, or after it,
    /// `rmsnorm_QK_post_rope_*`).
    #[nki_object]
    pub struct QkNorm {
        /// Whether it is applied.
        pub enabled: bool,
        /// Its epsilon.
        pub eps: f64,
        /// Q's gamma `[1, d]`.
        #[dtypes(float32, bfloat16, float16)]
        pub W_Q: Option<Hbm>,
        /// K's gamma `[1, d]`.
        #[dtypes(float32, bfloat16, float16)]
        pub W_K: Option<Hbm>,
    }

    /// RoPE's arguments.
    #[nki_object]
    pub struct Rope {
        /// `[d/2, B, S]` cosines (RoPE applied when both tables are given).
        #[dtypes(float32, bfloat16, float16)]
        pub cos: Option<Hbm>,
        /// The sines, like `cos`.
        #[dtypes(float32, bfloat16, float16)]
        pub sin: Option<Hbm>,
        /// Rotated halves contiguous (else interleaved pairs).
        pub rope_contiguous_layout: bool,
    }

    /// The attention's arguments: the caches it reads and its mask.
    #[nki_object]
    pub struct AttentionCache {
        /// `K_cache` holds `[B, d, S_max_ctx]` (a flat cache only).
        pub K_cache_transposed: bool,
        /// A block cache's table `[B, blocks]` (a flat cache when `None`).
        #[dtypes(int32, uint32)]
        pub active_blocks_table: Option<Hbm>,
        /// The keys.
        #[dtypes(float32, bfloat16, float16, float8_e4m3)]
        pub K_cache: Hbm,
        /// The values.
        #[dtypes(float32, bfloat16, float16, float8_e4m3)]
        pub V_cache: Hbm,
        /// `[S_ctx, B, q_heads, S_tkg]`, nonzero where a position is attended.
        #[dtypes(uint8)]
        pub attention_mask: Hbm,
        /// Per-head attention sinks.
        #[dtypes(float32, bfloat16, float16)]
        pub sink: Option<Hbm>,
    }

    /// The KV cache update's arguments.
    #[nki_object]
    pub struct CacheUpdate {
        /// Write the new keys and values into the caches (else return them).
        pub update_cache: bool,
        /// The write positions `[B, 1]`.
        #[dtypes(int32, uint32)]
        pub kv_cache_update_idx: Option<Hbm>,
    }

    /// The output projection's arguments (none without `W_out`).
    #[nki_object]
    pub struct OutProjection {
        /// Weights `[q_heads·d, H]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3)]
        pub W_out: Option<Hbm>,
        /// Bias `[1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub bias_out: Option<Hbm>,
        /// The weights' quantization.
        pub quantization_type_out: QuantizationType,
        /// The fp8 weights' dequantization scale.
        #[dtypes(float32)]
        pub weight_dequant_scale_out: Option<Hbm>,
        /// The activations' dequantization scale.
        #[dtypes(float32)]
        pub input_dequant_scale_out: Option<Hbm>,
        /// The output in the transposed layout.
        pub transposed_out: bool,
    }

    /// The arguments with defaults (the library's "optional params").
    #[nki_object]
    pub struct BlockOptions {
        /// Multiplies `Q·Kᵀ` (`1/sqrt(d)` when `None`).
        pub softmax_scale: Option<f64>,
        /// Tile the prior context in the flash attention.
        #[default(true)]
        pub enable_fa_s_prior_tiling: bool,
        /// fp8 KV-cache quantization: the keys' scale.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub k_scale: Option<Hbm>,
        /// The values' scale, with `k_scale`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub v_scale: Option<Hbm>,
        /// Skip the attention (its output the scaled queries).
        #[default(false)]
        pub skip_attention: bool,
        /// KV data parallelism: the ranks sharing the batches.
        #[default(1)]
        pub KVDP: i64,
        /// The ranks of the KV data parallelism.
        #[default(None)]
        pub KVDP_replica_group: Option<ReplicaGroup>,
    }

    /// The Q/K processing: the norms around RoPE and RoPE's tables.
    #[nki_object]
    pub struct QkProcessing {
        /// RMSNorm before RoPE.
        pub pre: QkNorm,
        /// RMSNorm after RoPE.
        pub post: QkNorm,
        /// RoPE's tables and layout.
        pub rope: Rope,
    }

    /// One tile's new keys and values in SBUF, for the cache update.
    #[nki_object]
    pub struct TileKv {
        /// Keys `[d, tb·S]` (head dim on the partitions).
        pub k: Tensor,
        /// Keys `[tb·S, d]` (a token a partition).
        pub k_rows: Tensor,
        /// Values `[tb·S, d]`.
        pub v: Tensor,
    }

    /// The attention's inputs after the Q/K processing.
    #[nki_object]
    pub struct AttnInputs {
        /// Queries `[d, B·q_heads·S]`, scaled by `softmax_scale`.
        pub q: Tensor,
        /// Active keys `[d, B·S]`.
        pub k: Tensor,
        /// Active values `[B, 1, S, d]`.
        pub v: Tensor,
    }

    /// The sizes of a call, the block's own rules checked (the phases' kernels
    /// check theirs). Under KV data parallelism the caches, the mask and the
    /// table are this rank's: `B / KVDP` batches, the mask's heads those of
    /// the whole group (`q_heads · KVDP`).
    #[nki_helper]
    pub fn validate_and_extract_config(X: Hbm, W_qkv: Hbm, cache: AttentionCache, KVDP: i64) -> AttnBlockDims {
        let (K_cache, V_cache, attention_mask) = (cache.K_cache, cache.V_cache, cache.attention_mask);
        let (active_blocks_table, K_cache_transposed) = (cache.active_blocks_table, cache.K_cache_transposed);
        assert!(X.ndim() == 3, "attention_block_tkg: X must be [B, S_tkg, H] in HBM, got {} dims", X.ndim());
        let [b, s_tkg, h] = X.shape();
        assert!(h > 0 && h % PMAX == 0, HIDDEN);
        let d_head = V_cache.shape()[V_cache.ndim() - 1];
        let i = W_qkv.shape()[1];
        assert!(d_head > 0 && d_head % 2 == 0 && i % d_head == 0 && i / d_head > 2 * KV_HEADS, HEADS);
        let q_heads = i / d_head - 2 * KV_HEADS;
        // As in the library, a KVDP of 1 or less means no data parallelism.
        let kvdp = KVDP.max(1);
        assert!(b % kvdp == 0, KVDP_BATCH);
        let (b_attn, q_heads_attn) = (b / kvdp, q_heads * kvdp);
        let block_len = if active_blocks_table.is_some() { V_cache.shape()[1] } else { 0 };
        let mut s_ctx = attention_mask.shape()[0];
        let mut s_max_ctx = V_cache.shape()[V_cache.ndim() - 2];
        if let Some(table) = active_blocks_table {
            assert!(!K_cache_transposed, BLOCK_TRANSPOSED);
            s_ctx = table.shape()[1] * block_len;
            s_max_ctx = s_ctx;
        } else {
            let k_seq = if K_cache_transposed { K_cache.shape()[K_cache.ndim() - 1] } else { K_cache.shape()[K_cache.ndim() - 2] };
            assert!(
                V_cache.shape()[0] == b_attn,
                "attention_block_tkg: V_cache must hold B / KVDP = {b_attn} batches, got {}",
                V_cache.shape()[0]
            );
            assert!(
                k_seq == s_max_ctx,
                "attention_block_tkg: K_cache and V_cache must hold S_max_ctx = {s_max_ctx} positions, got {k_seq}"
            );
        }
        let m = attention_mask.shape();
        assert!(
            attention_mask.ndim() == 4 && m[0] == s_ctx && m[1] == b_attn && m[2] == q_heads_attn && m[3] == s_tkg,
            "attention_block_tkg: attention_mask must be [S_ctx, B / KVDP, q_heads * KVDP, S_tkg] = [{s_ctx}, {b_attn}, {q_heads_attn}, {s_tkg}], got {m}"
        );
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        // Whole batches a tile (S_tkg <= 128 is attention_tkg's rule, checked when it is called).
        let tile_b = (PMAX / s_tkg).min(b).max(1);
        AttnBlockDims { b, s_tkg, d_head, q_heads, s_ctx, s_max_ctx, block_len, programs, tile_b, kvdp }
    }

    /// The sizes the attention and the cache update work on: the library's
    /// `B_attn = B / KVDP` batches (this rank's) and `q_heads_attn = q_heads ·
    /// KVDP` heads (every rank's, gathered); `dims` itself without KV data
    /// parallelism.
    #[nki_helper]
    pub fn attention_dims(dims: AttnBlockDims) -> AttnBlockDims {
        let b = dims.b / dims.kvdp;
        AttnBlockDims {
            b,
            s_tkg: dims.s_tkg,
            d_head: dims.d_head,
            q_heads: dims.q_heads * dims.kvdp,
            s_ctx: dims.s_ctx,
            s_max_ctx: dims.s_max_ctx,
            block_len: dims.block_len,
            programs: dims.programs,
            tile_b: (PMAX / dims.s_tkg).min(b).max(1),
            kvdp: dims.kvdp,
        }
    }

    /// The library's `_rms_norm_inplace`: each column of `x` `[d, N]` (`d =
    /// 128`) divided by the root of its mean square plus `eps`, times `w`
    /// `[1, d]` when given; in fp32, rounded back into `x`.
    #[nki_helper]
    pub fn rms_norm_inplace(x: Sbuf, eps: f64, w: Option<Hbm>) {
        let [d, n] = x.shape();
        assert!(d == PMAX, QK_NORM_HEAD);
        let ones = nl::ndarray([d, d], nl::float32, buffer = nl::sbuf);
        nisa::memset(ones, 1.0);
        let eps_sb = nl::ndarray([d, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(eps_sb, eps);
        let w_sb = nl::ndarray([d, 1], nl::float32, buffer = nl::sbuf);
        if let Some(wv) = w {
            nisa::dma_copy(w_sb, wv.reshape([d, 1]));
        }
        for c in 0..n.div_ceil(PSUM_FMAX) {
            let c0 = c * PSUM_FMAX;
            let cols = (n - c0).min(PSUM_FMAX);
            let xc = x[s![.., c0..c0 + cols]];
            let sq = nl::ndarray([d, PSUM_FMAX], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(sq[s![.., 0..cols]], xc, xc, nl::multiply);
            let sums = nl::ndarray([d, PSUM_FMAX], nl::float32, buffer = nl::psum);
            nisa::nc_matmul(sums[s![.., 0..cols]], ones, sq[s![.., 0..cols]]);
            let rs = nl::ndarray([d, PSUM_FMAX], nl::float32, buffer = nl::sbuf);
            nisa::activation(rs[s![.., 0..cols]], nl::rsqrt, sums[s![.., 0..cols]], bias = eps_sb, scale = 1.0 / d as f64);
            let y = nl::ndarray([d, PSUM_FMAX], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(y[s![.., 0..cols]], xc, rs[s![.., 0..cols]], nl::multiply);
            if w.is_some() {
                nisa::tensor_scalar(y[s![.., 0..cols]], y[s![.., 0..cols]], nl::multiply, w_sb);
            }
            nisa::tensor_copy(xc, y[s![.., 0..cols]]);
        }
    }

    /// `n_heads` heads of a tile `qkv_sb` `[b·S, I]` (`b` batches) from
    /// column `col0`, each transposed, into `[d, b·n_heads·S]` (column
    /// `(b·n_heads + h)·S + t`).
    #[nki_helper]
    pub fn transpose_heads(dims: AttnBlockDims, qkv_sb: Sbuf, col0: i64, n_heads: i64) -> Sbuf {
        let (d, st) = (dims.d_head, dims.s_tkg);
        let b = qkv_sb.shape()[0] / st;
        let out = nl::ndarray([d, b * n_heads * st], qkv_sb.dtype(), buffer = nl::sbuf);
        let out4 = out.reshape([d, b, n_heads, st]);
        for h in 0..n_heads {
            let ps = nl::ndarray([d, b * st], qkv_sb.dtype(), buffer = nl::psum);
            let c0 = col0 + h * d;
            nisa::nc_transpose(ps, qkv_sb[s![.., c0..c0 + d]]);
            nisa::tensor_copy(out4[s![.., .., h, ..]], ps.reshape([d, b, st]));
        }
        out
    }

    /// The library's `_process_head_group`: Q (`n_heads = q_heads`) or K
    /// (`n_heads = 1`) of a tile `qkv_sb` `[b·S, I]` transposed, then the
    /// pre-RoPE RMSNorm, RoPE (`p`'s tables are the tile's) and the post-RoPE
    /// RMSNorm (each when enabled); `[d, b·n_heads·S]` in SBUF.
    #[nki_helper]
    pub fn process_head_group(dims: AttnBlockDims, qkv_sb: Sbuf, col0: i64, n_heads: i64, p: QkProcessing, is_q: bool) -> Sbuf {
        let (d, st) = (dims.d_head, dims.s_tkg);
        let b = qkv_sb.shape()[0] / st;
        let x: Sbuf = transpose_heads(dims, qkv_sb, col0, n_heads);
        if p.pre.enabled {
            rms_norm_inplace(x, p.pre.eps, if is_q { p.pre.W_Q } else { p.pre.W_K });
        }
        let (cos_t, sin_t) = (p.rope.cos, p.rope.sin);
        if let Some(cos) = cos_t {
            // Validated: sin is given with cos.
            let sin = sin_t.unwrap_or(cos);
            assert!(d == 64 || d == 128, ROPE_HEAD);
            let staged = nl::ndarray([d, b, n_heads, st], x.dtype(), buffer = nl::private_hbm);
            nisa::dma_copy(staged, x.reshape([d, b, n_heads, st]));
            let rotated: Hbm = crate::embeddings::rope::RoPE(staged, cos, sin, contiguous_layout = p.rope.rope_contiguous_layout);
            nisa::dma_copy(x.reshape([d, b, n_heads, st]), rotated);
        }
        if p.post.enabled {
            rms_norm_inplace(x, p.post.eps, if is_q { p.post.W_Q } else { p.post.W_K });
        }
        x
    }

    /// The library's `_quantize_to_fp8`: `x` times `scale` (one value, `[128,
    /// 1]` rows read per partition or `[1, 1]` broadcast) in fp32, clipped to
    /// `±FP8_E4M3_MAX`, rounded to `float8_e4m3`.
    #[nki_helper]
    pub fn quantize_to_fp8(x: Sbuf, scale: Hbm) -> Sbuf {
        let [p, f] = x.shape();
        let scale_sb = nl::ndarray([p, 1], scale.dtype(), buffer = nl::sbuf);
        if scale.shape()[0] == PMAX {
            nisa::dma_copy(scale_sb, scale[s![0..p, ..]]);
        } else {
            nisa::dma_copy(scale_sb, scale.ap([[0, p], [1, 1]], offset = 0));
        }
        let scaled = nl::ndarray([p, f], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(scaled, x, nl::multiply, scale_sb);
        let q = nl::ndarray([p, f], nl::float8_e4m3, buffer = nl::sbuf);
        nisa::tensor_scalar(q, scaled, nl::minimum, FP8_E4M3_MAX, op1 = nl::maximum, operand1 = -FP8_E4M3_MAX);
        q
    }

    /// RoPE's tables of the `tb` batches from `b0` (copies, as RoPE takes
    /// whole tensors); `p` as it is without RoPE.
    #[nki_helper]
    pub fn tile_tables(p: QkProcessing, b0: i64, tb: i64) -> QkProcessing {
        let (cos_t, sin_t) = (p.rope.cos, p.rope.sin);
        let mut tile = p;
        if let Some(cos) = cos_t {
            // Validated: sin is given with cos.
            let sin = sin_t.unwrap_or(cos);
            let [half, _, st] = cos.shape();
            let c = nl::ndarray([half, tb, st], cos.dtype(), buffer = nl::private_hbm);
            nisa::dma_copy(c, cos[s![.., b0..b0 + tb, ..]]);
            let sn = nl::ndarray([half, tb, st], sin.dtype(), buffer = nl::private_hbm);
            nisa::dma_copy(sn, sin[s![.., b0..b0 + tb, ..]]);
            let rope = Rope { cos: Some(c), sin: Some(sn), rope_contiguous_layout: p.rope.rope_contiguous_layout };
            tile = QkProcessing { pre: p.pre, post: p.post, rope };
        }
        tile
    }

    /// The library's `_QKV_processing`: per tile of whole batches, the
    /// projection's rows loaded, Q and K processed (Q scaled by
    /// `softmax_scale`) and V's columns (K and V quantized to fp8 with
    /// `k_scale` and `v_scale`); each stored into this program's HBM scratch
    /// in the attention's layouts.
    #[nki_helper]
    pub fn qkv_processing(
        dims: AttnBlockDims,
        qkv_out: Hbm,
        p: QkProcessing,
        softmax_scale: f64,
        k_scale: Option<Hbm>,
        v_scale: Option<Hbm>,
    ) -> AttnInputs {
        let (d, b, st, nq) = (dims.d_head, dims.b, dims.s_tkg, dims.q_heads);
        let i = d * (nq + 2 * KV_HEADS);
        let dt = qkv_out.dtype();
        let kv_dt = if k_scale.is_some() { nl::float8_e4m3 } else { dt };
        let rows = qkv_out.reshape([b * st, i]);
        let q = nl::ndarray([d, b * nq * st], dt, buffer = nl::private_hbm);
        let k = nl::ndarray([d, b * st], kv_dt, buffer = nl::private_hbm);
        let v = nl::ndarray([b, 1, st, d], kv_dt, buffer = nl::private_hbm);
        let (q4, v_rows) = (q.reshape([d, b, nq, st]), v.reshape([b * st, d]));
        let v0 = d * (nq + KV_HEADS);
        for tile in 0..b.div_ceil(dims.tile_b) {
            let b0 = tile * dims.tile_b;
            let tb = (b - b0).min(dims.tile_b);
            let (r0, r1) = (b0 * st, (b0 + tb) * st);
            let qkv_sb = nl::ndarray([tb * st, i], dt, buffer = nl::sbuf);
            nisa::dma_copy(qkv_sb, rows[s![r0..r1, ..]]);
            let tp = tile_tables(p, b0, tb);
            let q_sb: Sbuf = process_head_group(dims, qkv_sb, 0, nq, tp, true);
            nisa::tensor_scalar(q_sb, q_sb, nl::multiply, softmax_scale);
            let mut k_sb: Sbuf = process_head_group(dims, qkv_sb, d * nq, KV_HEADS, tp, false);
            let mut v_sb = qkv_sb[s![.., v0..v0 + d]];
            // Validated: v_scale is given with k_scale.
            if let Some(ks) = k_scale {
                k_sb = quantize_to_fp8(k_sb, ks);
                v_sb = quantize_to_fp8(v_sb, v_scale.unwrap_or(ks));
            }
            nisa::dma_copy(q4[s![.., b0..b0 + tb, .., ..]], q_sb.reshape([d, tb, nq, st]));
            nisa::dma_copy(k[s![.., r0..r1]], k_sb);
            nisa::dma_copy(v_rows[s![r0..r1, ..]], v_sb);
        }
        AttnInputs { q, k, v }
    }

    /// The attention of `inp` over the cache by `attention_tkg`, `flags` being
    /// `(out_in_sb, enable_fa_s_prior_tiling)` (the output
    /// `[d, B·q_heads·S]` with `out_in_sb`, for the projection, else `[B,
    /// q_heads, d, S]`); both programs' batches stored before it is read.
    #[nki_helper]
    pub fn attention_phase(dims: AttnBlockDims, inp: AttnInputs, cache: AttentionCache, flags: (bool, bool)) -> Hbm {
        let (b, d, smax) = (dims.b, dims.d_head, dims.s_max_ctx);
        let (K_cache, V_cache, k_tp) = (cache.K_cache, cache.V_cache, cache.K_cache_transposed);
        let (out_in_sb, fa_tiling) = flags;
        let (k_prior, v_prior) = if dims.block_len > 0 {
            (K_cache, V_cache)
        } else if k_tp {
            (K_cache.reshape([b, 1, d, smax]), V_cache.reshape([b, 1, smax, d]))
        } else {
            (K_cache.reshape([b, 1, smax, d]), V_cache.reshape([b, 1, smax, d]))
        };
        let cfg = attention_block_config(b, dims.q_heads, dims.s_tkg, dims.s_ctx, smax, d, dims.block_len, k_tp, out_in_sb, fa_tiling);
        let (out, _k_out): (Hbm, Hbm) = attention_tkg(
            inp.q,
            inp.k,
            inp.v,
            k_prior,
            v_prior,
            cache.attention_mask,
            cfg,
            sink = cache.sink,
            active_blocks_table = cache.active_blocks_table,
        );
        if dims.programs == 2 {
            nisa::core_barrier(out, [0, 1]);
        }
        out
    }

    /// `cols` `[d, n]` (SBUF) as the rows `[n, d]` of `rows` (HBM): PE
    /// transposes of 128 columns at a time (the collectives gather an HBM
    /// tensor's first dim, so the heads or batches must lead).
    #[nki_helper]
    pub fn columns_to_rows(cols: Sbuf, rows: Hbm) {
        let [d, n] = cols.shape();
        for t in 0..n.div_ceil(PMAX) {
            let (t0, size) = (t * PMAX, (n - t * PMAX).min(PMAX));
            let ps = nl::ndarray([size, d], cols.dtype(), buffer = nl::psum);
            nisa::nc_transpose(ps, cols[s![.., t0..t0 + size]]);
            let tile = nl::ndarray([size, d], cols.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(tile, ps);
            nisa::dma_copy(rows[s![t0..t0 + size, ..]], tile);
        }
    }

    /// The rows `[n, d]` of `rows` (HBM) as columns `[d, n]` in SBUF: PE
    /// transposes of 128 rows at a time.
    #[nki_helper]
    pub fn rows_to_columns(rows: Hbm) -> Sbuf {
        let [n, d] = rows.shape();
        let cols = nl::ndarray([d, n], rows.dtype(), buffer = nl::sbuf);
        for t in 0..n.div_ceil(PMAX) {
            let (t0, size) = (t * PMAX, (n - t * PMAX).min(PMAX));
            let tile = nl::ndarray([size, d], rows.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(tile, rows[s![t0..t0 + size, ..]]);
            let ps = nl::ndarray([d, size], rows.dtype(), buffer = nl::psum);
            nisa::nc_transpose(ps, tile);
            nisa::tensor_copy(cols[s![.., t0..t0 + size]], ps);
        }
        cols
    }

    /// This rank's part of `t` read as `[outer, KVDP, inner]`: the `[outer,
    /// inner]` slice at index `rank` of the middle dim, copied into this
    /// program's HBM scratch. The rank is a register, so the slice's start
    /// moves on the device (`scalar_offset`); the copy makes it contiguous
    /// for the reshapes that follow.
    #[nki_helper]
    pub fn select_rank_slice(t: Hbm, outer: i64, kvdp: i64, inner: i64, rank: Register) -> Hbm {
        let out = nl::ndarray([outer, inner], t.dtype(), buffer = nl::private_hbm);
        let view =
            t.reshape([outer, kvdp, inner]).ap([[kvdp * inner, outer], [1, inner]], offset = 0, scalar_offset = rank, indirect_dim = 1);
        nisa::dma_copy(out, view);
        out
    }

    /// The library's Q gather for `q_heads > 1`: `q` `[d, B·q_heads·S]`
    /// transposed to head-major rows `[q_heads, B, S, d]`, all-gathered over
    /// `group` (`[q_heads · KVDP, B, S, d]`, rank `r`'s heads at `r ·
    /// q_heads`), this rank's batches selected, and transposed back to the
    /// attention's columns `[d, B_attn·q_heads_attn·S]` (batch-major).
    #[nki_helper]
    pub fn gather_q_heads(dims: AttnBlockDims, q: Hbm, group: ReplicaGroup, rank: Register) -> Hbm {
        let (d, b, st, nq, kvdp) = (dims.d_head, dims.b, dims.s_tkg, dims.q_heads, dims.kvdp);
        let (b_attn, nqa, dt) = (b / kvdp, nq * kvdp, q.dtype());
        // Heads outermost among the columns, so that the transposed rows are head-major.
        let by_head = nl::ndarray([d, nq, b, st], dt, buffer = nl::sbuf);
        let q4 = q.reshape([d, b, nq, st]);
        for h in 0..nq {
            nisa::dma_copy(by_head[s![.., h, .., ..]], q4[s![.., .., h, ..]]);
        }
        let rows = nl::ndarray([nq, b, st, d], dt, buffer = nl::private_hbm);
        columns_to_rows(by_head.reshape([d, nq * b * st]), rows.reshape([nq * b * st, d]));
        let gathered = nl::ndarray([nqa, b, st, d], dt, buffer = nl::private_hbm);
        ncc::all_gather([rows], [gathered], group, 0);
        let sliced: Hbm = select_rank_slice(gathered, nqa, kvdp, b_attn * st * d, rank);
        let cols: Sbuf = rows_to_columns(sliced.reshape([nqa * b_attn * st, d]));
        // Head-major columns to the attention's batch-major ones.
        let out = nl::ndarray([d, b_attn * nqa * st], dt, buffer = nl::private_hbm);
        let (out4, cols4) = (out.reshape([d, b_attn, nqa, st]), cols.reshape([d, nqa, b_attn, st]));
        for h in 0..nqa {
            nisa::dma_copy(out4[s![.., .., h, ..]], cols4[s![.., h, .., ..]]);
        }
        out
    }

    /// The library's Q gather for one query head: `q` `[d, B·S]` needs no
    /// transpose, its `d` rows are all-gathered as they are (`[KVDP · d,
    /// B·S]`, rank `r`'s head at rows `r · d`), this rank's batches selected
    /// and each head's `[d, B_attn·S]` placed among the attention's
    /// batch-major columns.
    #[nki_helper]
    pub fn gather_q_one_head(dims: AttnBlockDims, q: Hbm, group: ReplicaGroup, rank: Register) -> Hbm {
        let (d, b, st, kvdp) = (dims.d_head, dims.b, dims.s_tkg, dims.kvdp);
        let (b_attn, nqa, dt) = (b / kvdp, kvdp, q.dtype());
        let gathered = nl::ndarray([nqa * d, b * st], dt, buffer = nl::private_hbm);
        ncc::all_gather([q.reshape([d, b * st])], [gathered], group, 0);
        let sliced: Hbm = select_rank_slice(gathered, nqa * d, kvdp, b_attn * st, rank);
        let out = nl::ndarray([d, b_attn * nqa * st], dt, buffer = nl::private_hbm);
        let (out4, heads) = (out.reshape([d, b_attn, nqa, st]), sliced.reshape([nqa, d, b_attn, st]));
        for h in 0..nqa {
            nisa::dma_copy(out4[s![.., .., h, ..]], heads[s![h, .., .., ..]]);
        }
        out
    }

    /// The library's `_KVDP_attention_input_collectives`: the queries of
    /// every rank of `group` gathered (head `r · q_heads + h` is rank `r`'s
    /// head `h`), then this rank's `B / KVDP` batches (from `rank_id ·
    /// B_attn`) of the queries and of the new keys and values, which every
    /// rank computed for all `B` batches: the attention's inputs for
    /// `B_attn` batches and `q_heads · KVDP` heads.
    #[nki_helper]
    pub fn kvdp_attention_input_collectives(dims: AttnBlockDims, inp: AttnInputs, group: ReplicaGroup) -> AttnInputs {
        let (d, st, kvdp) = (dims.d_head, dims.s_tkg, dims.kvdp);
        let b_attn = dims.b / kvdp;
        let rank = ncc::rank_id();
        let q: Hbm = if dims.q_heads == 1 { gather_q_one_head(dims, inp.q, group, rank) } else { gather_q_heads(dims, inp.q, group, rank) };
        let k: Hbm = select_rank_slice(inp.k, d, kvdp, b_attn * st, rank);
        let v: Hbm = select_rank_slice(inp.v, 1, kvdp, b_attn * KV_HEADS * st * d, rank);
        AttnInputs { q, k, v: v.reshape([b_attn, KV_HEADS, st, d]) }
    }

    /// The library's `_KVDP_attention_output_collectives`: the attention's
    /// output `attn` `[d, B_attn·q_heads_attn·S]` transposed to batch-major
    /// rows `[B_attn, q_heads_attn, S, d]`, all-gathered over `group` (`[B,
    /// q_heads_attn, S, d]`, rank `r`'s batches at `r · B_attn`), this rank's
    /// own `q_heads` heads selected (from `rank_id · q_heads`) and transposed
    /// back to `[d, B·q_heads·S]`, the layout the output projection takes.
    #[nki_helper]
    pub fn kvdp_attention_output_collectives(dims: AttnBlockDims, attn: Hbm, group: ReplicaGroup) -> Hbm {
        let (d, b, st, nq, kvdp) = (dims.d_head, dims.b, dims.s_tkg, dims.q_heads, dims.kvdp);
        let (n_attn, dt) = ((b / kvdp) * nq * kvdp * st, attn.dtype());
        let cols = nl::ndarray([d, n_attn], dt, buffer = nl::sbuf);
        nisa::dma_copy(cols, attn.reshape([d, n_attn]));
        let rows = nl::ndarray([n_attn, d], dt, buffer = nl::private_hbm);
        columns_to_rows(cols, rows);
        let gathered = nl::ndarray([b, nq * kvdp * st * d], dt, buffer = nl::private_hbm);
        ncc::all_gather([rows.reshape([b / kvdp, nq * kvdp * st * d])], [gathered], group, 0);
        let rank = ncc::rank_id();
        let sliced: Hbm = select_rank_slice(gathered, b, kvdp, nq * st * d, rank);
        let n = b * nq * st;
        let back: Sbuf = rows_to_columns(sliced.reshape([n, d]));
        let out = nl::ndarray([d, n], dt, buffer = nl::private_hbm);
        nisa::dma_copy(out, back);
        out
    }

    /// A copy of this program's scratch `t` in a shared HBM output (written
    /// by program 0; every program holds the same values).
    #[nki_helper]
    pub fn to_shared_hbm(dims: AttnBlockDims, t: Hbm) -> Hbm {
        let out = nl::ndarray(t.shape(), t.dtype(), buffer = nl::shared_hbm);
        let prg = if dims.programs > 1 { nl::program_id(0) } else { 0 };
        if prg == 0 {
            nisa::dma_copy(out, t);
        }
        out
    }

    /// One tile's new keys and values in SBUF: the keys `[d, tb·S]` as the
    /// attention takes them and transposed to rows `[tb·S, d]`, the values
    /// `[tb·S, d]` (`tb` batches from `b0`).
    #[nki_helper]
    pub fn tile_kv_rows(dims: AttnBlockDims, inp: AttnInputs, b0: i64, tb: i64) -> TileKv {
        let (d, st) = (dims.d_head, dims.s_tkg);
        let (t0, t1) = (b0 * st, (b0 + tb) * st);
        let (v_rows, dt) = (inp.v.reshape([dims.b * st, d]), inp.k.dtype());
        let v = nl::ndarray([tb * st, d], inp.v.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(v, v_rows[s![t0..t1, ..]]);
        let k = nl::ndarray([d, tb * st], dt, buffer = nl::sbuf);
        nisa::dma_copy(k, inp.k[s![.., t0..t1]]);
        // The PE array does not transpose fp8: through bfloat16 (exact both ways).
        let wide = if dt == nl::float8_e4m3 { nl::bfloat16 } else { dt };
        let k_wide = nl::ndarray([d, tb * st], wide, buffer = nl::sbuf);
        nisa::tensor_copy(k_wide, k);
        let k_ps = nl::ndarray([tb * st, d], wide, buffer = nl::psum);
        nisa::nc_transpose(k_ps, k_wide);
        let k_rows = nl::ndarray([tb * st, d], dt, buffer = nl::sbuf);
        nisa::tensor_copy(k_rows, k_ps);
        TileKv { k, k_rows, v }
    }

    /// The library's `_kv_cache_update`: batch `b`'s `S` new keys and values
    /// written into the flat or the block cache at `kv_cache_update_idx[b]`
    /// (read on the device), a tile of whole batches at a time; V by program
    /// 0, K by the last program.
    #[nki_helper]
    pub fn kv_cache_update(dims: AttnBlockDims, K_cache: Hbm, V_cache: Hbm, inp: AttnInputs, idx: Hbm, K_cache_transposed: bool) {
        let b = dims.b;
        assert!(idx.ndim() == 2 && idx.shape()[0] == b && idx.shape()[1] == 1, UPDATE);
        let start = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
        for tile in 0..b.div_ceil(dims.tile_b) {
            let b0 = tile * dims.tile_b;
            let tb = (b - b0).min(dims.tile_b);
            let kv = tile_kv_rows(dims, inp, b0, tb);
            for bt in 0..tb {
                let bi = b0 + bt;
                nisa::dma_copy(start, idx[s![bi..bi + 1, ..]]);
                if dims.block_len > 0 {
                    update_block_cache(dims, K_cache, V_cache, kv, bt, start);
                } else {
                    update_flat_cache(dims, K_cache, V_cache, kv, bt, bi, start, K_cache_transposed);
                }
            }
        }
    }

    /// The library's `_update_flat_cache` for one batch: the tile's batch
    /// `bt` (batch `bi`) written at position `start` of batch `bi`'s rows.
    #[nki_helper]
    pub fn update_flat_cache(
        dims: AttnBlockDims,
        K_cache: Hbm,
        V_cache: Hbm,
        kv: TileKv,
        bt: i64,
        bi: i64,
        start: Sbuf,
        K_cache_transposed: bool,
    ) {
        let (d, b, st, smax) = (dims.d_head, dims.b, dims.s_tkg, dims.s_max_ctx);
        let prg = if dims.programs > 1 { nl::program_id(0) } else { 0 };
        let (r0, r1) = (bt * st, (bt + 1) * st);
        if prg == 0 {
            let dst = V_cache.reshape([b, smax, d]).ap([[d, st], [1, d]], offset = bi * smax * d, scalar_offset = start, indirect_dim = 1);
            nisa::dma_copy(dst, kv.v[s![r0..r1, ..]]);
        }
        if prg == dims.programs - 1 {
            if K_cache_transposed {
                let kc = K_cache.reshape([b, d, smax]);
                let dst = kc.ap([[smax, d], [1, st]], offset = bi * d * smax, scalar_offset = start, indirect_dim = 2);
                nisa::dma_copy(dst, kv.k[s![.., r0..r1]]);
            } else {
                let kc = K_cache.reshape([b, smax, d]);
                let dst = kc.ap([[d, st], [1, d]], offset = bi * smax * d, scalar_offset = start, indirect_dim = 1);
                nisa::dma_copy(dst, kv.k_rows[s![r0..r1, ..]]);
            }
        }
    }

    /// The library's `_update_block_cache` for one batch: the tile's batch
    /// `bt` written to the `S` consecutive slots of the block pool (`[blocks
    /// · block_len, d]`, one row a slot) from slot `start`; a slot outside
    /// the pool is skipped (`oob_mode=skip`: `uint32` max marks a padding
    /// batch).
    #[nki_helper]
    pub fn update_block_cache(dims: AttnBlockDims, K_cache: Hbm, V_cache: Hbm, kv: TileKv, bt: i64, start: Sbuf) {
        let (d, st) = (dims.d_head, dims.s_tkg);
        let prg = if dims.programs > 1 { nl::program_id(0) } else { 0 };
        let slots = V_cache.shape()[0] * dims.block_len;
        let (r0, r1) = (bt * st, (bt + 1) * st);
        if prg == 0 {
            let dst = V_cache.reshape([slots, d]).ap([[d, st], [1, d]], offset = 0, scalar_offset = start, indirect_dim = 0);
            nisa::dma_copy(dst, kv.v[s![r0..r1, ..]], oob_mode = nisa::oob_mode::skip);
        }
        if prg == dims.programs - 1 {
            let dst = K_cache.reshape([slots, d]).ap([[d, st], [1, d]], offset = 0, scalar_offset = start, indirect_dim = 0);
            nisa::dma_copy(dst, kv.k_rows[s![r0..r1, ..]], oob_mode = nisa::oob_mode::skip);
        }
    }

    /// The fp8 KV-cache quantization's inputs: both scales or neither, with
    /// caches in `float8_e4m3`, each scale one value (`[128, 1]` or `[1, 1]`).
    #[nki_helper]
    pub fn check_kv_scales(K_cache: Hbm, V_cache: Hbm, k_scale: Option<Hbm>, v_scale: Option<Hbm>) {
        assert!(k_scale.is_some() == v_scale.is_some(), KV_SCALES);
        let kv_fp8 = K_cache.dtype() == nl::float8_e4m3 && V_cache.dtype() == nl::float8_e4m3;
        assert!(k_scale.is_none() || kv_fp8, KV_QUANT_CACHE);
        if let Some(ks) = k_scale {
            assert!(ks.ndim() == 2 && ks.shape()[1] == 1 && (ks.shape()[0] == PMAX || ks.shape()[0] == 1), KV_SCALE_SHAPE);
        }
        if let Some(vs) = v_scale {
            assert!(vs.ndim() == 2 && vs.shape()[1] == 1 && (vs.shape()[0] == PMAX || vs.shape()[0] == 1), KV_SCALE_SHAPE);
        }
    }

    /// The attention block of `X` `[B, S_tkg, H]` (module docs): returns the
    /// output, then the updated caches (`update_cache`) or the new keys
    /// `[d, B_attn, S_tkg]` and values `[B_attn, 1, S_tkg, d]` (`B_attn = B /
    /// KVDP`, `B` without KV data parallelism). The output is `[B, q_heads,
    /// d, S_tkg]` without `W_out` (`[d, B·q_heads·S_tkg]` with `KVDP > 1`, as
    /// the library returns it), else `[B·S_tkg, H]` (or `[128, lnc,
    /// H/lnc/128, B·S_tkg]` with `transposed_out`).
    #[nki_kernel]
    pub fn attention_block_tkg(
        #[dtypes(float32, bfloat16, float16)] X: Hbm,
        X_hidden_dim_actual: Option<i64>,
        #[spread(prefix = "rmsnorm_X_")] norm_x: RmsNormX,
        #[spread] proj: QkvProjection,
        #[spread(prefix = "rmsnorm_QK_pre_rope_")] pre: QkNorm,
        #[spread] rope: Rope,
        #[spread(prefix = "rmsnorm_QK_post_rope_")] post: QkNorm,
        #[spread] cache: AttentionCache,
        #[spread] update: CacheUpdate,
        #[spread] out_proj: OutProjection,
        out_in_sb: bool,
        #[spread] opts: BlockOptions,
    ) -> Outputs {
        assert!(!out_in_sb, OUT_IN_SB);
        assert!(opts.KVDP <= 1 || opts.KVDP_replica_group.is_some(), KVDP_GROUP);
        check_kv_scales(cache.K_cache, cache.V_cache, opts.k_scale, opts.v_scale);
        assert!(!out_proj.transposed_out || out_proj.W_out.is_some(), TRANSPOSED_OUT);
        assert!(rope.cos.is_some() == rope.sin.is_some(), ROPE_TABLES);
        assert!(!update.update_cache || update.kv_cache_update_idx.is_some(), UPDATE);
        let dims = validate_and_extract_config(X, proj.W_qkv, cache, opts.KVDP);
        let (d, b, st, nq) = (dims.d_head, dims.b, dims.s_tkg, dims.q_heads);
        assert!(!opts.skip_attention || b * st <= PMAX, SKIP_ATTENTION_TILES);
        // The attention and the cache update take this rank's batches with every rank's heads.
        let adims = attention_dims(dims);

        // QKV projection (the fused RMSNorm of X), [B, S, I].
        let qkv_out: Hbm = qkv(
            X,
            proj.W_qkv,
            output_layout = QKVOutputLayout::BSD,
            bias = proj.bias_qkv,
            quantization_type = proj.quantization_type_qkv,
            qkv_w_scale = proj.weight_dequant_scale_qkv,
            qkv_in_scale = proj.input_dequant_scale_qkv,
            fused_norm_type = if norm_x.enabled { NormType::RMS_NORM } else { NormType::NO_NORM },
            gamma_norm_weights = norm_x.gamma,
            norm_eps = rmsnorm_X_eps.unwrap_or(DEFAULT_RMSNORM_X_EPS),
            hidden_actual = X_hidden_dim_actual,
            d_head = Some(d),
            num_q_heads = Some(nq),
            num_kv_heads = Some(KV_HEADS),
        );
        if dims.programs == 2 {
            nisa::core_barrier(qkv_out, [0, 1]);
        }

        // Q/K processing and V, Q scaled.
        let p = QkProcessing { pre, post, rope };
        let scale = if opts.skip_attention { 1.0 } else { softmax_scale.unwrap_or(1.0 / (d as f64).sqrt()) };
        let mut inp = qkv_processing(dims, qkv_out, p, scale, opts.k_scale, opts.v_scale);

        // KV data parallelism: every rank's query heads, this rank's batches.
        let is_kvdp = dims.kvdp > 1;
        let kvdp_group = if is_kvdp { opts.KVDP_replica_group } else { None };
        if let Some(group) = kvdp_group {
            inp = kvdp_attention_input_collectives(dims, inp, group);
        }

        // Attention over the cache (or the queries as they are, skip_attention);
        // under KV data parallelism in the projection's layout, which the output
        // collectives take.
        let do_out_proj = out_proj.W_out.is_some();
        let flags = (do_out_proj || is_kvdp, opts.enable_fa_s_prior_tiling);
        let mut attn_out: Hbm = if opts.skip_attention { inp.q } else { attention_phase(adims, inp, cache, flags) };

        // KV data parallelism: every batch of this rank's own query heads.
        if let Some(group) = kvdp_group {
            attn_out = kvdp_attention_output_collectives(dims, attn_out, group);
        }

        // The cache update, or the new keys and values (this rank's batches).
        let mut k_ret = cache.K_cache;
        let mut v_ret = cache.V_cache;
        if update.update_cache {
            // Validated: kv_cache_update_idx is given with update_cache.
            let idx = kv_cache_update_idx.unwrap_or(cache.attention_mask);
            kv_cache_update(adims, cache.K_cache, cache.V_cache, inp, idx, cache.K_cache_transposed);
        } else {
            let k_new: Hbm = inp.k;
            k_ret = to_shared_hbm(adims, k_new.reshape([d, adims.b, st]));
            v_ret = to_shared_hbm(adims, inp.v);
        }

        // The output projection. Without it the output is copied out when it
        // is this program's scratch: the queries (both the attention and the
        // projection skipped) or the gathered output `[d, B·q_heads·S]`.
        let mut kernel_output = attn_out;
        if !do_out_proj && (opts.skip_attention || is_kvdp) {
            kernel_output = to_shared_hbm(dims, attn_out);
        }
        if let Some(w) = out_proj.W_out {
            kernel_output = output_projection_tkg(
                attn_out.reshape([d, b, nq, st]),
                w,
                bias = out_proj.bias_out,
                quantization_type = out_proj.quantization_type_out,
                weight_scale = out_proj.weight_dequant_scale_out,
                input_scale = out_proj.input_dequant_scale_out,
                TRANSPOSE_OUT = out_proj.transposed_out,
            );
        }
        Outputs(kernel_output, k_ret, v_ret)
    }
}

/// Why an `attention_block_tkg` call is refused: the block's own rules, then
/// the first rule of `attention_tkg` its call breaks (the projection's and
/// RoPE's kernels check their own when traced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnBlockRule {
    /// `out_in_sb=True`.
    OutInSb,
    /// `KVDP > 1` without `KVDP_replica_group`.
    KvdpGroup,
    /// One of `k_scale` / `v_scale` without the other.
    KvScales,
    /// `k_scale` / `v_scale` with caches not in `float8_e4m3`.
    KvQuantCache,
    /// `transposed_out` without `W_out`.
    TransposedOut,
    /// Only one of `cos` and `sin`.
    RopeTables,
    /// `update_cache` without `kv_cache_update_idx`.
    Update,
    /// `H` is not a positive multiple of 128.
    Hidden,
    /// `d_head` odd, or `W_qkv` not `(q_heads + 2) · d_head` columns.
    Heads,
    /// `B` not a multiple of `KVDP > 1`.
    KvdpBatch,
    /// A block cache with `K_cache_transposed`.
    BlockTransposed,
    /// `skip_attention` with `B · S_tkg > 128` (more than one tile of token rows).
    SkipAttentionTiles,
    /// A Q/K RMSNorm with `d_head` other than 128.
    QkNormHead,
    /// RoPE with `d_head` other than 64 or 128.
    RopeHead,
    /// A rule of the attention (`attention_tkg`).
    Attention(TkgRule),
}

impl AttnBlockRule {
    /// The rule in words (the kernel's assert message).
    pub const fn message(self) -> &'static str {
        match self {
            AttnBlockRule::OutInSb => OUT_IN_SB,
            AttnBlockRule::KvdpGroup => KVDP_GROUP,
            AttnBlockRule::KvScales => KV_SCALES,
            AttnBlockRule::KvQuantCache => KV_QUANT_CACHE,
            AttnBlockRule::TransposedOut => TRANSPOSED_OUT,
            AttnBlockRule::RopeTables => ROPE_TABLES,
            AttnBlockRule::Update => UPDATE,
            AttnBlockRule::Hidden => HIDDEN,
            AttnBlockRule::Heads => HEADS,
            AttnBlockRule::KvdpBatch => KVDP_BATCH,
            AttnBlockRule::BlockTransposed => BLOCK_TRANSPOSED,
            AttnBlockRule::SkipAttentionTiles => SKIP_ATTENTION_TILES,
            AttnBlockRule::QkNormHead => QK_NORM_HEAD,
            AttnBlockRule::RopeHead => ROPE_HEAD,
            AttnBlockRule::Attention(r) => r.message(),
        }
    }
}

/// An `attention_block_tkg` call as the rules read it: sizes and options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnBlockCall {
    /// `B`.
    pub b: i64,
    /// `S_tkg`.
    pub s_tkg: i64,
    /// `H`.
    pub h: i64,
    /// `d_head`.
    pub d_head: i64,
    /// Query heads.
    pub q_heads: i64,
    /// `S_ctx` (the mask's positions).
    pub s_ctx: i64,
    /// `S_max_ctx` (the cache's).
    pub s_max_ctx: i64,
    /// Block length of a block cache, 0 for a flat one.
    pub block_len: i64,
    /// `out_in_sb`.
    pub out_in_sb: bool,
    /// `KVDP` (KV data parallelism when above 1).
    pub kvdp: i64,
    /// Whether `KVDP_replica_group` is given.
    pub has_replica_group: bool,
    /// Whether `k_scale` is given.
    pub has_k_scale: bool,
    /// Whether `v_scale` is given.
    pub has_v_scale: bool,
    /// Whether `K_cache` and `V_cache` are `float8_e4m3`.
    pub fp8_cache: bool,
    /// Whether `W_out` is given.
    pub has_w_out: bool,
    /// `transposed_out`.
    pub transposed_out: bool,
    /// Whether `cos` is given.
    pub has_cos: bool,
    /// Whether `sin` is given.
    pub has_sin: bool,
    /// Whether either Q/K RMSNorm is enabled.
    pub qk_norm: bool,
    /// `K_cache_transposed`.
    pub k_cache_transposed: bool,
    /// `update_cache`.
    pub update_cache: bool,
    /// Whether `kv_cache_update_idx` is given.
    pub has_update_idx: bool,
    /// Whether `sink` is given.
    pub sink: bool,
    /// `enable_fa_s_prior_tiling`.
    pub fa_tiling: bool,
    /// `skip_attention`.
    pub skip_attention: bool,
}

impl AttnBlockCall {
    /// A call of these sizes with the library's test defaults: a flat cache
    /// of `s_ctx` positions, RoPE, the cache update and the projection.
    pub const fn new(b: i64, s_tkg: i64, h: i64, d_head: i64, q_heads: i64, s_ctx: i64) -> Self {
        AttnBlockCall {
            b,
            s_tkg,
            h,
            d_head,
            q_heads,
            s_ctx,
            s_max_ctx: s_ctx,
            block_len: 0,
            out_in_sb: false,
            kvdp: 1,
            has_replica_group: false,
            has_k_scale: false,
            has_v_scale: false,
            fp8_cache: false,
            has_w_out: true,
            transposed_out: false,
            has_cos: true,
            has_sin: true,
            qk_norm: false,
            k_cache_transposed: false,
            update_cache: true,
            has_update_idx: true,
            sink: false,
            fa_tiling: true,
            skip_attention: false,
        }
    }
}

/// The first rule `c` breaks: the block's own, in the order the kernel checks
/// them, then `attention_tkg`'s for the call the block makes.
pub const fn attn_block_violation(c: AttnBlockCall) -> Option<AttnBlockRule> {
    let rules = [
        (c.out_in_sb, AttnBlockRule::OutInSb),
        (c.kvdp > 1 && !c.has_replica_group, AttnBlockRule::KvdpGroup),
        (c.has_k_scale != c.has_v_scale, AttnBlockRule::KvScales),
        (c.has_k_scale && !c.fp8_cache, AttnBlockRule::KvQuantCache),
        (c.transposed_out && !c.has_w_out, AttnBlockRule::TransposedOut),
        (c.has_cos != c.has_sin, AttnBlockRule::RopeTables),
        (c.update_cache && !c.has_update_idx, AttnBlockRule::Update),
        (c.h <= 0 || c.h % 128 != 0, AttnBlockRule::Hidden),
        (c.d_head <= 0 || c.d_head % 2 != 0 || c.q_heads < 1, AttnBlockRule::Heads),
        (c.kvdp > 1 && c.b % c.kvdp != 0, AttnBlockRule::KvdpBatch),
        (c.block_len > 0 && c.k_cache_transposed, AttnBlockRule::BlockTransposed),
        (c.skip_attention && c.b * c.s_tkg > 128, AttnBlockRule::SkipAttentionTiles),
        (c.qk_norm && c.d_head != 128, AttnBlockRule::QkNormHead),
        (c.has_cos && c.d_head != 64 && c.d_head != 128, AttnBlockRule::RopeHead),
    ];
    let mut i = 0;
    while i < rules.len() {
        if rules[i].0 {
            return Some(rules[i].1);
        }
        i += 1;
    }
    // The attention takes this rank's B / KVDP batches with every rank's heads.
    let kvdp = if c.kvdp > 1 { c.kvdp } else { 1 };
    let dims = TkgDims {
        bs: c.b / kvdp,
        q_head: c.q_heads * kvdp,
        s_active: c.s_tkg,
        curr_sprior: c.s_ctx,
        full_sprior: c.s_max_ctx,
        d_head: c.d_head,
    };
    let cfg = TkgConfig::new(dims)
        .tp_k_prior(!c.k_cache_transposed)
        .qk_in_sb(true)
        .out_in_sb(c.has_w_out || kvdp > 1)
        .strided_mm1(c.block_len == 0)
        .fa_tiling(c.fa_tiling)
        .block_len(c.block_len)
        .sink(c.sink);
    match cfg.violation() {
        Some(r) => Some(AttnBlockRule::Attention(r)),
        None => None,
    }
}

/// An `attention_block_tkg` call checked at compile time, or a compile error
/// naming the rule it breaks. Options not given take [`AttnBlockCall::new`]'s.
///
/// ```
/// let c = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264);
/// assert_eq!(c.s_max_ctx, 11264);
/// ```
///
/// ```compile_fail
/// // The Q/K RMSNorm puts a head's elements on the 128 partitions.
/// let c = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, qk_norm = true);
/// ```
#[macro_export]
macro_rules! attn_block_config {
    (b = $b:expr, s_tkg = $s:expr, h = $h:expr, d_head = $d:expr, q_heads = $q:expr, s_ctx = $c:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::experimental::transformer::attention_block_tkg::AttnBlockCall =
            $crate::experimental::transformer::attention_block_tkg::AttnBlockCall {
                $($field: $v,)*
                ..$crate::experimental::transformer::attention_block_tkg::AttnBlockCall::new($b, $s, $h, $d, $q, $c)
            };
        const _: () = if let Some(rule) = $crate::experimental::transformer::attention_block_tkg::attn_block_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}
