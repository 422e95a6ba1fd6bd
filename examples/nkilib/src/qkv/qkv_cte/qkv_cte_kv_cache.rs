//! Step 6 of `qkv_cte` with the fp8 KV-cache outputs: Q stored alone, K
//! and V divided by their scales, clipped in `kv_dtype` and stored into
//! their caches, by rows `[B, max_seq_len, kv_dim]` or into the slots of
//! the block caches `[num_blocks, block_size, kv_dim]` (an indirect DMA).

pub use kernel::*;

/// The KV-cache stores.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::P_MAX;
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteConfig, QkvCteDims, QkvCteGlobals, QkvCteTensors};
    use nki::prelude::*;

    /// The KV-cache outputs' step 6: Q's columns of `out_sb` (rows `s0..s0 +
    /// rows` of batch `b`) into the output `[B, S, q_dim]`, K's and V's
    /// quantized into their caches (the block caches' slots loaded first).
    #[nki_helper]
    pub fn store_q_and_quantize_kv(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        out_sb: Sbuf,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        nisa::dma_copy(io.output[s![b, s0..s0 + rows, ..]], out_sb[s![0..rows, 0..dims.q_dim]]);
        // The block caches' slots of these rows (else not written).
        let slots_sb = nl::ndarray([P_MAX, 1], nl::int32, buffer = nl::sbuf);
        let (slot_mapping, k_cache, v_cache) = (io.slot_mapping, io.k_cache, io.v_cache);
        if let Some(slots) = slot_mapping {
            nisa::dma_copy(slots_sb[s![0..rows, ..]], slots.reshape([dims.b, dims.s, 1])[s![b, s0..s0 + rows, ..]]);
        }
        if let Some(kc) = k_cache {
            quantize_and_store_kv(cfg, dims, kc, g.k_scale_sb, out_sb, slots_sb, dims.q_dim, b, s0, rows);
        }
        if let Some(vc) = v_cache {
            quantize_and_store_kv(cfg, dims, vc, g.v_scale_sb, out_sb, slots_sb, dims.q_dim + dims.kv_dim, b, s0, rows);
        }
    }

    /// The library's `_quantize_and_store_kv`: columns `off..off + kv_dim` of
    /// `out_sb` (K or V) times the reciprocal of `scale_sb`, rounded to
    /// `kv_dtype`, clipped to `[kv_min, kv_max]`, into `cache`: rows `s0..s0 +
    /// rows` of batch `b` (`[B, max_seq_len, kv_dim]`), or the slots
    /// `slots_sb` names (`[num_blocks, block_size, kv_dim]` seen as one row per slot).
    #[nki_helper]
    pub fn quantize_and_store_kv(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        cache: Hbm,
        scale_sb: Sbuf,
        out_sb: Sbuf,
        slots_sb: Sbuf,
        off: i64,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        let kv = dims.kv_dim;
        let inv_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::reciprocal(inv_scale_sb[s![0..rows, ..]], scale_sb[s![0..rows, ..]]);
        let clamped_sb = nl::ndarray([P_MAX, kv], cfg.kv_dtype, buffer = nl::sbuf);
        let c = clamped_sb[s![0..rows, ..]];
        nisa::tensor_scalar(c, out_sb[s![0..rows, off..off + kv]], nl::multiply, inv_scale_sb[s![0..rows, ..]]);
        nisa::tensor_scalar(c, c, nl::maximum, cfg.kv_min, op1 = nl::minimum, operand1 = cfg.kv_max);
        if cfg.use_block_kv {
            let [num_blocks, block_size, _] = cache.shape();
            let slots = cache.reshape([num_blocks * block_size, kv]);
            nisa::dma_copy(slots.ap([[kv, rows], [1, kv]], offset = 0, vector_offset = slots_sb[s![0..rows, ..]], indirect_dim = 0), c);
        } else {
            nisa::dma_copy(cache[s![b, s0..s0 + rows, ..]], c);
        }
    }
}
