//! Steps 5 and 6 of `qkv_cte`: the PSUM banks evicted to SBUF with the
//! bias (STATIC and MX with `qkv_in_scale`: dequantized; with RoPE on the Q and K heads), and
//! stored in the output layout (or as Q and the quantized K/V caches).

pub use kernel::*;

/// The output phases.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{NUM_QKV_SEGMENTS, P_MAX, PSUM_FMAX};
    use crate::qkv::qkv_cte::qkv_cte_kv_cache::store_q_and_quantize_kv;
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteConfig, QkvCteDims, QkvCteGlobals, QkvCteTensors};
    use crate::utils::common_types::QKVOutputLayout;
    use nki::prelude::*;

    /// The columns `c0..c1` of segment `seg` (0 Q, 1 K, 2 V) of the fused
    /// projection.
    #[nki_helper]
    pub fn qkv_segment_columns(dims: QkvCteDims, seg: i64) -> (i64, i64) {
        let (q, kv) = (dims.q_dim, dims.kv_dim);
        let c0 = if seg == 0 { 0 } else { q + (seg - 1) * kv };
        (c0, q + seg * kv)
    }

    /// The library's `_evict_psum_to_sbuf_apply_bias` (step 5): S tile `t`'s
    /// PSUM banks into `out_sb` `[rows, I]` (the compute dtype), plus the bias.
    /// With MX's `qkv_in_scale` it is the library's
    /// `_evict_psum_to_sbuf_static_dequant_apply_bias`: the banks times each Q,
    /// K and V segment's factor (plus the bias) straight into `out_sb`, the
    /// banks a segment boundary crosses in two pieces (one rounding of the fp32
    /// sums).
    #[nki_helper]
    pub fn evict_psum_to_sbuf_apply_bias(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        g: QkvCteGlobals,
        out_sb: Sbuf,
        psum: Psum,
        t: i64,
        rows: i64,
    ) {
        let (i, ni) = (dims.i, dims.num_512_tiles_per_i);
        if cfg.mx_static_dequant {
            for seg in 0..NUM_QKV_SEGMENTS {
                let (c0, c1): (i64, i64) = qkv_segment_columns(dims, seg);
                for k in c0 / PSUM_FMAX..(c1 - 1) / PSUM_FMAX + 1 {
                    let (a, z) = (c0.max(k * PSUM_FMAX), c1.min((k + 1) * PSUM_FMAX));
                    let src = psum[s![0..rows, t * ni + k, a - k * PSUM_FMAX..z - k * PSUM_FMAX]];
                    dequantize_apply_bias(cfg, g, out_sb[s![0..rows, a..z]], src, seg, a, rows);
                }
            }
        } else {
            for k in 0..ni {
                let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
                let dst = out_sb[s![0..rows, i0..i0 + iw]];
                let src = psum[s![0..rows, t * ni + k, 0..iw]];
                if cfg.add_bias && !cfg.static_quant {
                    nisa::tensor_tensor(dst, src, g.bias_sb[s![0..rows, i0..i0 + iw]], nl::add);
                } else {
                    nisa::tensor_copy(dst, src);
                }
            }
            if cfg.static_quant {
                for seg in 0..NUM_QKV_SEGMENTS {
                    let (c0, c1): (i64, i64) = qkv_segment_columns(dims, seg);
                    let cols = out_sb[s![0..rows, c0..c1]];
                    dequantize_apply_bias(cfg, g, cols, cols, seg, c0, rows);
                }
            }
        }
    }

    /// STATIC's dequantization (the library's
    /// `_evict_psum_to_sbuf_static_dequant_apply_bias`): `data` (columns
    /// `c0..` of Q, K or V, `seg` 0, 1 or 2) times that segment's factor, plus
    /// the bias, into `dst`.
    #[nki_helper]
    pub fn dequantize_apply_bias(cfg: QkvCteConfig, g: QkvCteGlobals, dst: Sbuf, data: Sbuf, seg: i64, c0: i64, rows: i64) {
        let scale = g.w_scale_sb[s![0..rows, seg..seg + 1]];
        let width = dst.shape()[1];
        if cfg.add_bias {
            nisa::scalar_tensor_tensor(dst, data, nl::multiply, scale, nl::add, g.bias_sb[s![0..rows, c0..c0 + width]]);
        } else {
            nisa::tensor_scalar(dst, data, nl::multiply, scale);
        }
    }

    /// One head of S tile `t` from PSUM into `dst` `[rows, d_head]`, plus its bias columns.
    #[nki_helper]
    pub fn copy_head_from_psum(cfg: QkvCteConfig, dims: QkvCteDims, g: QkvCteGlobals, dst: Sbuf, psum: Psum, t: i64, head: i64, rows: i64) {
        let d = dims.d_head;
        let heads_per_bank = PSUM_FMAX / d;
        let bank = t * dims.num_512_tiles_per_i + head / heads_per_bank;
        let c0 = (head % heads_per_bank) * d;
        let src = psum[s![0..rows, bank, c0..c0 + d]];
        if cfg.static_quant || cfg.mx_static_dequant {
            let seg: i64 = if head < dims.num_q_heads {
                0
            } else if head < dims.num_q_heads + dims.num_kv_heads {
                1
            } else {
                2
            };
            dequantize_apply_bias(cfg, g, dst, src, seg, head * d, rows);
        } else if cfg.add_bias {
            nisa::tensor_tensor(dst, src, g.bias_sb[s![0..rows, head * d..(head + 1) * d]], nl::add);
        } else {
            nisa::tensor_copy(dst, src);
        }
    }

    /// The library's `_copy_psum_to_sbuf_apply_rope_and_bias` (step 5 with
    /// RoPE): rows `s0..s0 + rows` of the caches loaded (cos whole, sin's
    /// first half, both halves being equal), then each Q and K head `X =
    /// [X1, X2]` (plus bias) becomes `X·cos + [-X2·sin, X1·sin]`, each
    /// product rounded to the compute dtype; the V heads are copied (plus bias).
    #[nki_helper]
    pub fn copy_psum_to_sbuf_apply_rope_and_bias(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        out_sb: Sbuf,
        psum: Psum,
        t: i64,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        let (d, half) = (dims.d_head, dims.d_head / 2);
        let dt = cfg.compute_mm_dtype;
        let cos_sb = nl::ndarray([P_MAX, d], dt, buffer = nl::sbuf);
        let sin_sb = nl::ndarray([P_MAX, half], dt, buffer = nl::sbuf);
        let shape = [dims.b, dims.s, d];
        let (cos_cache, sin_cache) = (io.cos_cache, io.sin_cache);
        if let Some(cos) = cos_cache {
            nisa::dma_copy(cos_sb[s![0..rows, ..]], cos.reshape(shape)[s![b, s0..s0 + rows, ..]]);
        }
        if let Some(sin) = sin_cache {
            nisa::dma_copy(sin_sb[s![0..rows, ..]], sin.reshape(shape)[s![b, s0..s0 + rows, 0..half]]);
        }
        let (cos, sin) = (cos_sb[s![0..rows, ..]], sin_sb[s![0..rows, ..]]);
        // [X (then X·cos) | -X2·sin, X1·sin]
        let rope_sb = nl::ndarray([P_MAX, 2 * d], dt, buffer = nl::sbuf);
        let x = rope_sb[s![0..rows, 0..d]];
        let (x1, x2) = (rope_sb[s![0..rows, 0..half]], rope_sb[s![0..rows, half..d]]);
        let (rot1, rot2) = (rope_sb[s![0..rows, d..d + half]], rope_sb[s![0..rows, d + half..2 * d]]);
        for head in 0..dims.num_q_heads + dims.num_kv_heads {
            copy_head_from_psum(cfg, dims, g, x, psum, t, head, rows);
            nisa::tensor_tensor(rot1, x2, sin, nl::multiply);
            nisa::tensor_scalar(rot1, rot1, nl::multiply, -1.0);
            nisa::tensor_tensor(rot2, x1, sin, nl::multiply);
            nisa::tensor_tensor(x, x, cos, nl::multiply);
            nisa::tensor_tensor(out_sb[s![0..rows, head * d..(head + 1) * d]], x, rope_sb[s![0..rows, d..2 * d]], nl::add);
        }
        for head in dims.num_q_heads + dims.num_kv_heads..dims.num_heads {
            copy_head_from_psum(cfg, dims, g, out_sb[s![0..rows, head * d..(head + 1) * d]], psum, t, head, rows);
        }
    }

    /// Step 6: `out_sb` (rows `s0..s0 + rows` of batch `b`) into the output,
    /// `[B, S, I]` (BSD) or head by head into `[N, B, S, d_head]` (NBSd).
    #[nki_helper]
    pub fn store_output(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, out_sb: Sbuf, b: i64, s0: i64, rows: i64) {
        if cfg.output_layout == QKVOutputLayout::NBSd {
            let d = dims.d_head;
            for head in 0..dims.num_heads {
                nisa::dma_copy(io.output[s![head, b, s0..s0 + rows, ..]], out_sb[s![0..rows, head * d..(head + 1) * d]]);
            }
        } else {
            nisa::dma_copy(io.output[s![b, s0..s0 + rows, ..]], out_sb[s![0..rows, ..]]);
        }
    }

    /// Steps 5 and 6 for an S block of `rows` rows from row `s0` of batch `b`
    /// (its tiles' sums in `psum`): each tile evicted with the bias (or RoPE),
    /// then stored in the output layout or, with the KV-cache outputs, as Q
    /// and the quantized K and V.
    #[nki_helper]
    pub fn evict_and_store_block(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        psum: Psum,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        let tiles = rows.div_ceil(P_MAX);
        let out_sb = nl::ndarray([P_MAX, tiles, dims.i], cfg.output_sb_dtype, buffer = nl::sbuf);
        for t in 0..tiles {
            let r = (rows - t * P_MAX).min(P_MAX);
            let o = out_sb[s![.., t, ..]];
            if cfg.fused_rope {
                copy_psum_to_sbuf_apply_rope_and_bias(cfg, dims, io, g, o, psum, t, b, s0 + t * P_MAX, r);
            } else {
                evict_psum_to_sbuf_apply_bias(cfg, dims, g, o, psum, t, r);
            }
            if cfg.use_kv_quantization {
                store_q_and_quantize_kv(cfg, dims, io, g, o, b, s0 + t * P_MAX, r);
            } else {
                store_output(cfg, dims, io, o, b, s0 + t * P_MAX, r);
            }
        }
    }
}
