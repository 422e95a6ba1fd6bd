//! `attention_tkg`: the NKI library's token-generation (decode) attention over a
//! KV cache, written in the DSL.
//!
//! A decode step attends `s_active` new tokens (1, or a few with speculative
//! decoding) of `q_head` query heads that share one KV head (GQA: the kernel is
//! called per KV head) to a KV cache of `curr_sprior` positions whose last
//! `s_active` slots are the active tokens: key `j < curr_sprior - s_active` comes
//! from `k_prior` / `v_prior`, the rest from `k_active` / `v_active`. A `uint8`
//! mask `[curr_sprior, bs, q_head, s_active]` says which keys each query sees
//! (nonzero: visible); an optional sink logit per head joins every softmax
//! denominator. `q` is not scaled by the kernel (pre-scale it, as the library
//! does without fused RoPE).
//!
//! Loop structure, per batch (with LNC2 the batches alternate between the two
//! programs, as the library's batch sharding splits them):
//!
//! 1. Load the batch's `q_head · s_active` query columns `(d, n)` as bf16; they
//!    stay on the stationary side of every QK matmul, so queries land on
//!    partitions and every softmax reduction runs along the free axis.
//! 2. For every flash-attention tile of [`FA_TILE_SIZE`] keys (one tile up to
//!    that length, the library's threshold):
//!    - QK per [`MM1_KEYS`] keys into PSUM, copied under the mask predicate onto
//!      a tile preset to `FLOAT32_MIN`;
//!    - the tile max (negated), merged into the running max, the correction
//!      `exp(max_old - max_new)`;
//!    - `exp(s - max)` into bf16 probabilities with fp32 row sums per 512 keys;
//!    - PV per 128 keys: probabilities PE-transposed to `(keys, n)`, accumulated
//!      in PSUM, added to the running output after scaling it by the correction.
//! 3. Normalise by the running sum (which starts at `exp(sink - sink) = 1` with
//!    the running max at the sink, so the sink needs no separate pass) and store
//!    each head's `(s_active, d)` rows as its `(d, s_active)` block of `out`.
//!
//! The library puts the keys on partitions for QK (`KQᵀ`) and transposes the
//! statistics instead; the numerics are the same (fp32 scores and statistics,
//! bf16 matmul operands, fp32 accumulation).

use nki::prelude::*;

pub use decode::*;

/// The kernel with its tile constants, its configuration bundle and its phase helpers.
#[nki_module]
pub mod decode {
    use nki::prelude::*;

    /// SBUF and PSUM partitions: the cache length's granularity, the most query
    /// columns of one batch, and the keys contracted by one PV matmul.
    pub const P_MAX: i64 = 128;
    /// Keys per QK matmul: one 2 KiB PSUM bank holds 512 fp32 columns.
    pub const MM1_KEYS: i64 = 512;
    /// Keys per PV accumulation group in one PSUM tile (four QK tiles).
    pub const PV_GROUP_KEYS: i64 = 2048;
    /// Keys per flash-attention tile (the library's `_FA_TILE_SIZE`): longer caches
    /// are streamed tile by tile with a running max and sum.
    pub const FA_TILE_SIZE: i64 = 8192;

    /// The library's `AttnTKGConfig`: shapes and flags of one call, with the
    /// library's field names, order and defaults. The kernel implements a flat KV
    /// cache with `q` and `k_active` in the layouts the library keeps in SBUF
    /// (`qk_in_sb=True`, read from HBM here); every other field must keep its
    /// default, and the kernel refuses it by name otherwise.
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
        /// Block length of a block KV cache; 0 (a flat cache) is the one implemented.
        #[default(0)]
        pub block_len: i64,
        /// k_prior is (B+, 1, full_sprior, d) and is transposed while loading (else (B+, 1, d, full_sprior)).
        #[default(false)]
        pub tp_k_prior: bool,
        /// The library's strided K load for QK (a DMA pattern); only the default is accepted.
        #[default(true)]
        pub strided_mm1: bool,
        /// Mask generated from position IDs; not implemented (the mask is an input).
        #[default(false)]
        pub use_pos_id: bool,
        /// Fused RoPE; not implemented (rotate and pre-scale q and k_active first).
        #[default(false)]
        pub fuse_rope: bool,
        /// GPSIMD SBUF-to-SBUF copies between LNC2 programs; only the default is accepted.
        #[default(true)]
        pub use_gpsimd_sb2sb: bool,
        /// q is (d, bs*q_head*s_active) and k_active (d, bs*s_active); required without fused RoPE, as in the library.
        #[default(false)]
        pub qk_in_sb: bool,
        /// k_out kept in SBUF; not implemented (k_out is for fused RoPE).
        #[default(false)]
        pub k_out_in_sb: bool,
        /// out kept in SBUF; not implemented (out is returned in HBM).
        #[default(false)]
        pub out_in_sb: bool,
    }

    /// The call's HBM tensors: the inputs as given, the output as allocated.
    #[nki_object]
    pub struct AttnTensors {
        /// Queries, `(d, bs·q_head·s_active)`.
        pub q: Tensor,
        /// Active keys, `(d, bs·s_active)`.
        pub k_active: Tensor,
        /// Active values, `(bs, 1, s_active, d)`.
        pub v_active: Tensor,
        /// The key cache.
        pub k_prior: Tensor,
        /// The value cache.
        pub v_prior: Tensor,
        /// The uint8 mask, `(curr_sprior, bs, q_head, s_active)`.
        pub mask: Tensor,
        /// A sink logit per head.
        pub sink: Option<Tensor>,
        /// The output, `(bs, q_head, d, s_active)`.
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
        /// Query columns of one batch (`q_head · s_active`): the partitions of every score tile.
        pub n_cols: i64,
        /// The first active key: keys below it come from the cache tensors.
        pub split: i64,
        /// `k_prior` is `(B+, 1, full_sprior, d)` and is transposed while loading.
        pub tp_k_prior: bool,
    }

    /// The library's `FATileContext`: one flash-attention tile of keys.
    #[nki_object]
    pub struct FATileContext {
        /// Its first key.
        pub tile_start: i64,
        /// Its keys (at most `FA_TILE_SIZE`).
        pub tile_len: i64,
    }

    /// The library's `AttnInternalBuffers` of one batch: the queries and the running state.
    #[nki_object]
    pub struct AttnInternalBuffers {
        /// The batch.
        pub batch_id: i64,
        /// Queries, `(d, n_cols)` bf16: the stationary side of every QK matmul.
        pub q_sb: Tensor,
        /// Running negated max per query column.
        pub running_negmax: Tensor,
        /// Running row sum per query column.
        pub running_sum: Tensor,
        /// The unnormalised output, `(n_cols, d)` fp32.
        pub acc: Tensor,
    }

    /// Loads keys `[k0, k0 + cols)` of batch `b` of the cache sequence (prior up to
    /// `split`, then the active keys) as columns of the `(d, cols)` tile `dst`.
    #[nki_helper]
    fn load_keys(dst: Sbuf, atp: AttnTileParams, io: AttnTensors, b: i64, k0: i64, cols: i64) {
        let (d, split, s_a) = (atp.d_head, atp.split, atp.s_active);
        let (k_prior, k_active) = (io.k_prior, io.k_active);
        let prior_end = (k0 + cols).min(split);
        if prior_end > k0 {
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
            nisa::dma_copy(dst[s![.., a0 - k0..cols]], k_active[s![.., b * s_a + a0 - split..b * s_a + k0 + cols - split]]);
        }
    }

    /// Loads values `[k0, k0 + rows)` of batch `b` (prior up to `split`, then active)
    /// as rows of the `(P_MAX, d)` tile `dst`.
    #[nki_helper]
    fn load_values(dst: Sbuf, atp: AttnTileParams, io: AttnTensors, b: i64, k0: i64, rows: i64) {
        let split = atp.split;
        let prior_end = (k0 + rows).min(split);
        if prior_end > k0 {
            nisa::dma_copy(dst[s![0..prior_end - k0, ..]], io.v_prior[s![b, 0, k0..prior_end, ..]]);
        }
        let a0 = k0.max(split);
        if k0 + rows > a0 {
            nisa::dma_copy(dst[s![a0 - k0..rows, ..]], io.v_active[s![b, 0, a0 - split..k0 + rows - split, ..]]);
        }
    }

    /// The sink logit of each query column (`sink[h]` for the `s_a` columns of head
    /// `h`) as an `(n, 1)` fp32 column.
    #[nki_helper]
    fn sink_column(sink: Hbm, q_head: i64, s_a: i64) -> Sbuf {
        let col = nl::ndarray([q_head * s_a, 1], nl::float32, buffer = nl::sbuf);
        for h in 0..q_head {
            for t in 0..s_a {
                let p = h * s_a + t;
                nisa::dma_copy(col[s![p..p + 1, ..]], sink[s![h..h + 1, ..]]);
            }
        }
        col
    }

    /// The library's `_allocate_fa_buffers` and `_prep_sink` for batch `b`: the
    /// queries loaded, the running statistics started — the negated max at `-sink`
    /// (so the sum starts at `exp(sink - sink) = 1`) or at `+FLOAT32_MAX` (sum 0,
    /// and the first correction `exp(-inf) = 0`) — and the output at zero.
    #[nki_helper]
    fn allocate_fa_buffers(atp: AttnTileParams, io: AttnTensors, b: i64) -> AttnInternalBuffers {
        let (n, d) = (atp.n_cols, atp.d_head);
        let q_sb = nl::ndarray([d, n], nl::bfloat16, buffer = nl::sbuf);
        nisa::dma_copy(q_sb, io.q[s![.., b * n..(b + 1) * n]]);
        let run_negmax = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        let run_sum = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        let sink = io.sink;
        if let Some(sk) = sink {
            let sc: Sbuf = sink_column(sk, atp.q_head, atp.s_active);
            nisa::tensor_scalar(run_negmax, sc, nl::multiply, -1.0);
            nisa::memset(run_sum, 1.0);
        } else {
            nisa::memset(run_negmax, f32::MAX);
            nisa::memset(run_sum, 0.0);
        }
        let acc = nl::ndarray([n, d], nl::float32, buffer = nl::sbuf);
        nisa::memset(acc, 0.0);
        AttnInternalBuffers { batch_id: b, q_sb, running_negmax: run_negmax, running_sum: run_sum, acc }
    }

    /// The library's `_compute_qk_matmul` with `_load_mask`: the scores of the FA
    /// tile's keys, `(n, tile_len)` fp32, the raw `q·k` where the mask is nonzero and
    /// `FLOAT32_MIN` elsewhere, per `MM1_KEYS` keys.
    #[nki_helper]
    fn compute_qk_matmul(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, fa: FATileContext) -> Sbuf {
        let (d, n, b, width, f0) = (atp.d_head, atp.n_cols, bufs.batch_id, fa.tile_len, fa.tile_start);
        let mask = io.mask;
        let bs = mask.shape()[1];
        let masked = nl::ndarray([n, width], nl::float32, buffer = nl::sbuf);
        nisa::memset(masked, f32::MIN);
        for c in 0..(width + MM1_KEYS - 1) / MM1_KEYS {
            let c0 = c * MM1_KEYS;
            let cols = (width - c0).min(MM1_KEYS);
            let k_sb = nl::ndarray([d, MM1_KEYS], nl::bfloat16, buffer = nl::sbuf);
            load_keys(k_sb, atp, io, b, f0 + c0, cols);
            let scores = nl::ndarray([n, MM1_KEYS], nl::float32, buffer = nl::psum);
            nisa::nc_matmul(scores[s![.., 0..cols]], bufs.q_sb, k_sb[s![.., 0..cols]]);
            // mask[key, b, h, t] for column p = h·s_a + t: partition stride 1, key stride bs·n.
            let visible = nl::ndarray([n, MM1_KEYS], mask.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(visible[s![.., 0..cols]], mask.ap([[1, n], [bs * n, cols]], offset = (f0 + c0) * bs * n + b * n));
            nisa::tensor_copy_predicated(masked[s![.., c0..c0 + cols]], scores[s![.., 0..cols]], visible[s![.., 0..cols]]);
        }
        masked
    }

    /// The library's `_fa_update_running_max` and `_fa_update_correction_factor`: the
    /// tile's negated max merged into the running one, and the correction
    /// `exp(max_old - max_new)` of the state so far. Returns `(new_negmax, correction)`.
    #[nki_helper]
    fn fa_update_running_max(atp: AttnTileParams, bufs: AttnInternalBuffers, masked: Sbuf) -> (Sbuf, Sbuf) {
        let n = atp.n_cols;
        let tile_negmax = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(tile_negmax, nl::maximum, masked, 1, negate = true);
        let new_negmax = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(new_negmax, bufs.running_negmax, tile_negmax, nl::minimum);
        let corr = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(corr, new_negmax, bufs.running_negmax, nl::subtract);
        nisa::activation(corr, nl::exp, corr);
        (new_negmax, corr)
    }

    /// The library's `_compute_exp_qk` and `_fa_update_running_sum`: `exp(s - max)`
    /// in bf16 with fp32 row sums per QK tile, the running sum corrected and
    /// increased by the tile's. Returns the probabilities, `(n, tile_len)`.
    #[nki_helper]
    fn compute_exp_qk(
        atp: AttnTileParams,
        bufs: AttnInternalBuffers,
        fa: FATileContext,
        masked: Sbuf,
        new_negmax: Sbuf,
        corr: Sbuf,
    ) -> Sbuf {
        let (n, width) = (atp.n_cols, fa.tile_len);
        let chunks = (width + MM1_KEYS - 1) / MM1_KEYS;
        let probs = nl::ndarray([n, width], nl::bfloat16, buffer = nl::sbuf);
        let part_sum = nl::ndarray([n, chunks], nl::float32, buffer = nl::sbuf);
        for c in 0..chunks {
            let c0 = c * MM1_KEYS;
            let cols = (width - c0).min(MM1_KEYS);
            nisa::activation_reduce(
                probs[s![.., c0..c0 + cols]],
                nl::exp,
                masked[s![.., c0..c0 + cols]],
                nl::add,
                part_sum[s![.., c..c + 1]],
                bias = new_negmax,
            );
        }
        let tile_sum = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_reduce(tile_sum, nl::add, part_sum, 1);
        let run_sum = bufs.running_sum;
        nisa::tensor_scalar(run_sum, run_sum, nl::multiply, corr);
        nisa::tensor_tensor(run_sum, run_sum, tile_sum, nl::add);
        probs
    }

    /// The library's `_compute_pv_matmul`: `Σ_j p[:, j] · v[j, :]` over the FA tile's
    /// keys, the bf16 probabilities PE-transposed per [`P_MAX`] keys and multiplied
    /// with the value rows, accumulated in PSUM per [`PV_GROUP_KEYS`] keys. Returns
    /// `(n, d)` fp32.
    #[nki_helper]
    fn compute_pv_matmul(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers, fa: FATileContext, probs: Sbuf) -> Sbuf {
        let (n, d, width) = (atp.n_cols, atp.d_head, fa.tile_len);
        let pv = nl::ndarray([n, d], nl::float32, buffer = nl::sbuf);
        nisa::memset(pv, 0.0);
        for g in 0..(width + PV_GROUP_KEYS - 1) / PV_GROUP_KEYS {
            let acc = nl::ndarray([n, d], nl::float32, buffer = nl::psum);
            let g0 = g * PV_GROUP_KEYS;
            let keys = (width - g0).min(PV_GROUP_KEYS);
            for v in 0..(keys + P_MAX - 1) / P_MAX {
                let c0 = g0 + v * P_MAX;
                let rows = (width - c0).min(P_MAX);
                let flipped = nl::ndarray([P_MAX, n], nl::bfloat16, buffer = nl::psum);
                nisa::nc_transpose(flipped[s![0..rows, ..]], probs[s![.., c0..c0 + rows]]);
                let p_t = nl::ndarray([P_MAX, n], nl::bfloat16, buffer = nl::sbuf);
                nisa::tensor_copy(p_t[s![0..rows, ..]], flipped[s![0..rows, ..]]);
                let v_sb = nl::ndarray([P_MAX, d], nl::bfloat16, buffer = nl::sbuf);
                load_values(v_sb, atp, io, bufs.batch_id, fa.tile_start + c0, rows);
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

    /// The library's `_fa_finalize_and_store`: the output divided by the running sum,
    /// head `h`'s rows (`h·s_a .. (h+1)·s_a`) stored as `out[b, h]` = `(d, s_a)`.
    #[nki_helper]
    fn fa_finalize_and_store(atp: AttnTileParams, io: AttnTensors, bufs: AttnInternalBuffers) {
        let (n, d, s_a, q_head, b) = (atp.n_cols, atp.d_head, atp.s_active, atp.q_head, bufs.batch_id);
        let out = io.out;
        let recip = nl::ndarray([n, 1], nl::float32, buffer = nl::sbuf);
        nisa::reciprocal(recip, bufs.running_sum);
        let o_sb = nl::ndarray([n, d], out.dtype(), buffer = nl::sbuf);
        nisa::tensor_scalar(o_sb, bufs.acc, nl::multiply, recip);
        for h in 0..q_head {
            nisa::dma_copy(out.ap([[1, s_a], [s_a, d]], offset = (b * q_head + h) * d * s_a), o_sb[s![h * s_a..(h + 1) * s_a, ..]]);
        }
    }

    /// Decode attention of batch `b`: the flash-attention loop over the cache, one
    /// [`FATileContext`] of at most `FA_TILE_SIZE` keys at a time, then the
    /// normalised output.
    #[nki_helper]
    fn attention_tkg_batch(atp: AttnTileParams, io: AttnTensors, b: i64) {
        let s_kv = atp.curr_sprior;
        let bufs: AttnInternalBuffers = allocate_fa_buffers(atp, io, b);
        for f in 0..(s_kv + FA_TILE_SIZE - 1) / FA_TILE_SIZE {
            let f0 = f * FA_TILE_SIZE;
            let fa = FATileContext { tile_start: f0, tile_len: (s_kv - f0).min(FA_TILE_SIZE) };
            let masked: Sbuf = compute_qk_matmul(atp, io, bufs, fa);
            let (new_negmax, corr): (Sbuf, Sbuf) = fa_update_running_max(atp, bufs, masked);
            let probs: Sbuf = compute_exp_qk(atp, bufs, fa, masked, new_negmax, corr);
            let pv: Sbuf = compute_pv_matmul(atp, io, bufs, fa, probs);
            fa_accumulate_output(bufs, pv, new_negmax, corr);
        }
        fa_finalize_and_store(atp, io, bufs);
    }
    /// Token-generation attention over a flat KV cache: the library's
    /// `attention_tkg` with its `AttnTKGConfig` bundle, without fused RoPE, block KV,
    /// in-kernel masks or in-SBUF outputs (each refused by name when asked for).
    ///
    /// `q` is `(d, bs·q_head·s_active)` (column `(b·q_head + h)·s_active + t`) and
    /// `k_active` `(d, bs·s_active)` (the library's `qk_in_sb=True` layouts), `v_active`
    /// `(bs, 1, s_active, d)`, `k_prior` `(B+, 1, d, full_sprior)` (or
    /// `(B+, 1, full_sprior, d)` with `cfg.tp_k_prior`), `v_prior` `(B+, 1, full_sprior, d)`,
    /// `mask` uint8 `(curr_sprior, bs, q_head, s_active)`, `sink` `(q_head, 1)`.
    /// Returns `out` `(bs, q_head, d, s_active)` in `q`'s dtype (the library's `out`
    /// argument; the library's `sbm` SBUF allocator has no counterpart: the kernel
    /// allocates its own tiles).
    #[nki_kernel]
    pub fn attention_tkg(
        #[dtypes(float32, bfloat16, float16)] q: Hbm,
        #[dtypes(float32, bfloat16, float16)] k_active: Hbm,
        #[dtypes(float32, bfloat16, float16)] v_active: Hbm,
        #[dtypes(float32, bfloat16, float16)] k_prior: Hbm,
        #[dtypes(float32, bfloat16, float16)] v_prior: Hbm,
        #[dtypes(uint8)] mask: Hbm,
        cfg: AttnTKGConfig,
        #[dtypes(float32)] inv_freqs: Option<Hbm>,
        #[dtypes(int32, float32)] rope_pos_ids: Option<Hbm>,
        #[dtypes(int32, float32)] start_pos_ids: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] sink: Option<Hbm>,
        #[dtypes(int32)] active_blocks_table: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] k_out: Option<Hbm>,
    ) -> Hbm {
        // The configuration this kernel implements: every other field at its default.
        let block_len = cfg.block_len;
        assert!(
            block_len == 0,
            "cfg.block_len={block_len} (a block KV cache) is not implemented: attention_tkg takes a flat cache, block_len=0"
        );
        assert!(cfg.strided_mm1, "cfg.strided_mm1=False is not implemented: attention_tkg keeps the default, True");
        assert!(!cfg.use_pos_id, "cfg.use_pos_id=True (an in-kernel mask) is not implemented: pass the mask, use_pos_id=False");
        assert!(!cfg.fuse_rope, "cfg.fuse_rope=True is not implemented: rotate q and k_active and scale q first, fuse_rope=False");
        assert!(cfg.use_gpsimd_sb2sb, "cfg.use_gpsimd_sb2sb=False is not implemented: attention_tkg keeps the default, True");
        assert!(
            cfg.qk_in_sb,
            "cfg.qk_in_sb=False: without fused RoPE q and k_active come in the qk_in_sb layouts, (d, bs*q_head*s_active) and (d, bs*s_active); set qk_in_sb=True"
        );
        assert!(!cfg.k_out_in_sb, "cfg.k_out_in_sb=True is not implemented (k_out is written by fused RoPE only)");
        assert!(!cfg.out_in_sb, "cfg.out_in_sb=True is not implemented: out is returned in HBM");
        assert!(inv_freqs.is_none(), "inv_freqs is for fused RoPE, which attention_tkg does not implement: pass None");
        assert!(rope_pos_ids.is_none(), "rope_pos_ids is for fused RoPE and use_pos_id, which attention_tkg does not implement: pass None");
        assert!(start_pos_ids.is_none(), "start_pos_ids (a per-query sliding window) is not implemented: pass None and window the mask");
        assert!(
            active_blocks_table.is_none(),
            "active_blocks_table is for a block KV cache, which attention_tkg does not implement: pass None"
        );
        assert!(k_out.is_none(), "k_out is written by fused RoPE, which attention_tkg does not implement: pass None");

        let (bs, q_head, s_active, d_head) = (cfg.bs, cfg.q_head, cfg.s_active, cfg.d_head);
        let (curr_sprior, full_sprior, tp_k_prior) = (cfg.curr_sprior, cfg.full_sprior, cfg.tp_k_prior);
        assert!(0 < bs, "Batch size must be strictly positive, got bs={bs}.");
        assert!(0 < q_head, "Number of Q heads must be strictly positive, got q_head={q_head}.");
        assert!(0 < s_active, "Number of decode tokens must be strictly positive, got s_active={s_active}.");
        assert!(
            0 < curr_sprior && curr_sprior <= full_sprior,
            "curr_sprior must be <= full_sprior. Got curr_sprior={curr_sprior}, full_sprior={full_sprior}."
        );
        assert!(0 < d_head && d_head <= P_MAX, "Unsupported d_head. Got d_head={d_head}, must be between 1 and {P_MAX}, inclusive.");
        assert!(curr_sprior % P_MAX == 0, "s_prior must be divisible by p_max. Got curr_sprior={curr_sprior}, p_max={P_MAX}.");
        assert!(q_head * s_active <= P_MAX, "q_head * s_active must fit the {P_MAX} partitions, got {q_head} * {s_active}.");
        let last_tile = curr_sprior - (curr_sprior - 1) / FA_TILE_SIZE * FA_TILE_SIZE;
        assert!(last_tile >= s_active, "Last FA tile size ({last_tile}) must be >= s_active ({s_active})");
        let n = q_head * s_active;
        let q_shape = q.shape();
        assert!(q.ndim() == 2 && q_shape[0] == d_head && q_shape[1] == bs * n, "q must be (d_head, bs * q_head * s_active), got {q_shape}");
        let ka_shape = k_active.shape();
        assert!(
            k_active.ndim() == 2 && ka_shape[0] == d_head && ka_shape[1] == bs * s_active,
            "k_active must be (d_head, bs * s_active), got {ka_shape}"
        );
        let va_shape = v_active.shape();
        assert!(
            v_active.ndim() == 4 && va_shape[0] == bs && va_shape[1] == 1 && va_shape[2] == s_active && va_shape[3] == d_head,
            "v_active must be (bs, 1, s_active, d_head), got {va_shape}"
        );
        let kp_shape = k_prior.shape();
        let kp_seq = if tp_k_prior { kp_shape[2] } else { kp_shape[3] };
        let kp_d = if tp_k_prior { kp_shape[3] } else { kp_shape[2] };
        assert!(
            k_prior.ndim() == 4 && kp_shape[0] >= bs && kp_shape[1] == 1 && kp_seq == full_sprior && kp_d == d_head,
            "k_prior must be (B+, 1, d_head, full_sprior), or (B+, 1, full_sprior, d_head) with tp_k_prior, got {kp_shape}"
        );
        let vp_shape = v_prior.shape();
        assert!(
            v_prior.ndim() == 4 && vp_shape[0] >= bs && vp_shape[1] == 1 && vp_shape[2] == full_sprior && vp_shape[3] == d_head,
            "v_prior must be (B+, 1, full_sprior, d_head), got {vp_shape}"
        );
        let m_shape = mask.shape();
        assert!(
            mask.ndim() == 4 && m_shape[0] == curr_sprior && m_shape[1] == bs && m_shape[2] == q_head && m_shape[3] == s_active,
            "mask must be (curr_sprior, bs, q_head, s_active), got {m_shape}"
        );
        assert!(mask.dtype() == nl::uint8, "mask must be uint8 (nonzero: visible)");
        if let Some(sk) = sink {
            let sk_shape = sk.shape();
            assert!(sk.ndim() == 2 && sk_shape[0] == q_head && sk_shape[1] == 1, "sink must be (q_head, 1), got {sk_shape}");
        }

        let out = nl::ndarray([bs, q_head, d_head, s_active], q.dtype(), buffer = nl::shared_hbm);
        // LNC sharding: whole batches, alternating between the programs.
        let grid = nl::program_ndim() == 1;
        let shard = if grid { nl::program_id(0) } else { 0 };
        let shards = if grid { nl::num_programs(0) } else { 1 };
        let io = AttnTensors { q, k_active, v_active, k_prior, v_prior, mask, sink, out };
        let atp = AttnTileParams { q_head, s_active, curr_sprior, d_head, n_cols: n, split: curr_sprior - s_active, tp_k_prior };
        for b in (shard..bs).step_by(shards) {
            attention_tkg_batch(atp, io, b);
        }
        out
    }
}
