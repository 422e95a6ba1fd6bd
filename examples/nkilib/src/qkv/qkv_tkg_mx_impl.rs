//! The MX (OCP microscaling, trn3) form of the library's `qkv_tkg`: the fused
//! QKV projection with MXFP8 weights quantized offline and the input quantized
//! on chip by `quantize_mx`, multiplied by `nc_matmul_mx`.
//!
//! ```text
//! x   = hidden [B·S, H]                    # H pre-shuffled: is_h_dim_4h_transposed
//! (RMS_NORM)  x = RMSNorm(x) · gamma       # gamma shuffled like H
//! xq, xs = quantize_mx(x)                  # fp8 e4m3 x4 + one uint8 scale per 32 values
//! out = dequant(xq, xs) @ dequant(qkv_w, qkv_w_scale)   # fp32 sums
//! (qkv_bias)  out += qkv_bias
//! out as [B, S, I]
//! ```
//!
//! Layouts. The weights are `[H/4, I]` `float8_e4m3fn_x4`: packed row
//! `t·128 + p` holds hidden rows `t·512 + 4p .. t·512 + 4p + 3`; their scales
//! `[H/32, I]` `uint8` hold one per 32 of those hidden rows (8 packed rows),
//! row `16t + g` for group `g` of tile `t`. The input's H is pre-shuffled from
//! `[H/512, 128, 4]` to `[4, H/512, 128]`, so loading it with H's 128-element
//! runs on the partitions (`[128, B·S, H/128]`, element `h = c·128 + p`) puts
//! the 4 values of one packed weight row at columns `k·H/512 + t`, `k = 0..4`,
//! of partition `p` (`swizzle_for_quantize` gathers them into `[128, H/512,
//! B·S, 4]`, the layout `quantize_mx` reads). Scales sit in their group's
//! SBUF quadrant: weight scale row `16t + 4q + i` goes to partition `32q + i`.
//!
//! ```text
//! x_sb  = x as [128, B·S, H/128]           # or the RMSNorm output in that layout
//! sw    = swizzle_for_quantize(x_sb)       [128, H1p, B·S, 4]   (this program's tiles)
//! xq, xs = quantize_mx(sw)                 [128, H1p, B·S] x4, [128, H1p, B·S] uint8
//! for each I block of up to I_BLOCK_SIZE columns:
//!     for each weight block of up to NUM_TILES_PER_WEIGHT_LOAD tiles:   (load_mx_weight_block)
//!         w_sb, ws_sb = the block's packed rows and quadrant-placed scales
//!         for each tile t, each I tile of <= 512 columns:
//!             psum[i tile] += nc_matmul_mx(xq[t], w_sb[t], xs[t], ws_sb[t])
//!     out_sb = psum (+ bias on program 0)        # input dtype
//!     (LNC2) out_sb += the other program's out_sb   # sendrecv
//!     store out_sb
//! ```
//!
//! With two programs (LNC2) each takes half of the `H/512` packed tiles; a
//! single packed tile is not split (both programs compute all of it). The
//! library's MX restrictions hold: `H` a multiple of 512, `B·S` of 4,
//! `is_h_dim_4h_transposed`, NO_NORM or RMS_NORM, the BSD layout, no
//! `fused_add`, `norm_bias` or `output_in_sbuf`; trn3 only.

use nki::prelude::*;

pub use kernel::*;

/// The kernel's MX phase helpers and their tile constants.
#[nki_module]
pub mod kernel {
    pub use crate::qkv::qkv_tkg_common::{I_BLOCK_SIZE, I_TILE_SIZE, NUM_PSUM_BANKS, P_MAX, QkvTkgDims, qkv_tkg_dims, sum_lnc_partials};
    use crate::subkernels::rmsnorm_tkg::rmsnorm_tkg_shard_on_bxs;
    pub use crate::utils::common_types::NormType;
    pub use crate::utils::mx_layout::{MX_PACK, NUM_QUADRANTS, QUADRANT, SCALE_GROUP_SIZE, SCALES_PER_QUADRANT};
    use nki::prelude::*;

    /// Hidden rows of one packed 128-row tile: `P_MAX · MX_PACK`.
    pub const H_PER_PACKED_TILE: i64 = 512;
    /// Packed tiles per weight load: 4-byte packed values of a 4096-column
    /// block fill a partition at 16 tiles, so loads take 8.
    pub const NUM_TILES_PER_WEIGHT_LOAD: i64 = 8;

    /// The call's dimensions and its program's share of the packed tiles.
    #[nki_object]
    pub struct QkvTkgMxConfig {
        /// `B`, `S`, `B · S`, `H` and `I`.
        pub dims: QkvTkgDims,
        /// Packed 128-row tiles of H: `H / 512`.
        pub h1_packed: i64,
        /// Programs sharing the packed tiles (1 when there is one tile).
        pub num_shards: i64,
        /// This program's share.
        pub shard_id: i64,
        /// Packed tiles of this program.
        pub h1_packed_shard: i64,
    }

    /// The config of a `[B, S, H]` input and `[H/4, I]` packed weights on this launch.
    #[nki_helper]
    pub fn qkv_tkg_mx_config(hidden: Hbm, qkv_w: Hbm) -> QkvTkgMxConfig {
        let dims: QkvTkgDims = qkv_tkg_dims(hidden, qkv_w);
        let h1_packed = dims.h / H_PER_PACKED_TILE;
        let grid = nl::program_ndim() == 1 && h1_packed > 1;
        let num_shards = if grid { nl::num_programs(0) } else { 1 };
        let shard_id = if grid { nl::program_id(0) } else { 0 };
        QkvTkgMxConfig { dims, h1_packed, num_shards, shard_id, h1_packed_shard: h1_packed / num_shards }
    }

    /// The MX form's checks, by parameter name, when the kernel is traced.
    #[nki_helper]
    pub fn validate_qkv_tkg_mx(
        hidden: Hbm,
        qkv_w: Hbm,
        qkv_w_scale: Option<Hbm>,
        fused_add: bool,
        norm_type: NormType,
        nbsd: bool,
        is_h_dim_4h_transposed: bool,
    ) {
        let [b, s, h] = hidden.shape();
        let [hp, i] = qkv_w.shape();
        assert!(nisa::get_nc_version() == nisa::nc_version::gen4, "qkv_tkg: quantization_type MX needs trn3 (nc_matmul_mx)");
        assert!(h % H_PER_PACKED_TILE == 0, "qkv_tkg: hidden: H = {h} must be a multiple of 512 for MX quantization");
        assert!((b * s) % MX_PACK == 0, "qkv_tkg: hidden: B * S = {} must be a multiple of 4 for MX quantization", b * s);
        assert!(
            hidden.dtype() != nl::float32,
            "qkv_tkg: hidden must be bfloat16 or float16 for MX quantization (quantize_mx reads 16-bit data)"
        );
        assert!(qkv_w.dtype() == nl::float8_e4m3fn_x4, "qkv_tkg: qkv_w must be float8_e4m3fn_x4 for MX quantization");
        assert!(hp * MX_PACK == h, "qkv_tkg: qkv_w must be [H / 4, I] = [{}, {i}] for MX quantization, got [{hp}, {i}]", h / MX_PACK);
        assert!(is_h_dim_4h_transposed, "qkv_tkg: is_h_dim_4h_transposed must be true for MX quantization");
        assert!(!fused_add, "qkv_tkg: fused_add is not supported with MX quantization");
        assert!(!nbsd, "qkv_tkg: output_layout must be BSD with MX quantization");
        assert!(
            norm_type == NormType::NO_NORM || norm_type == NormType::RMS_NORM,
            "qkv_tkg: norm_type must be NO_NORM or RMS_NORM with MX quantization"
        );
        assert!(qkv_w_scale.is_some(), "qkv_tkg: qkv_w_scale must be given for MX quantization");
        if let Some(ws) = qkv_w_scale {
            assert!(ws.dtype() == nl::uint8, "qkv_tkg: qkv_w_scale must be uint8 for MX quantization");
            let shape = ws.shape();
            assert!(
                ws.ndim() == 2 && shape[0] == h / SCALE_GROUP_SIZE && shape[1] == i,
                "qkv_tkg: qkv_w_scale must be [H / 32, I] = [{}, {i}] for MX quantization, got {shape}",
                h / SCALE_GROUP_SIZE
            );
        }
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let tiles = h / H_PER_PACKED_TILE;
        assert!(
            tiles == 1 || tiles % programs == 0,
            "qkv_tkg: H / 512 = {tiles} must split evenly over the {programs} LNC programs for MX quantization"
        );
    }

    /// The (optionally RMS-normalised) rows `[B·S, H]` as `[128, B·S, H/128]`
    /// in SBUF with element `h = c·128 + p` (H's 128-element runs on the
    /// partitions).
    #[nki_helper]
    pub fn load_hidden_mx(cfg: QkvTkgMxConfig, x: Hbm, norm_type: NormType, norm_w: Option<Hbm>, eps: f64, hidden_actual: i64) -> Sbuf {
        let (bxs, h1) = (cfg.dims.bxs, cfg.dims.h / P_MAX);
        let hidden_sb = nl::ndarray([P_MAX, bxs, h1], x.dtype(), buffer = nl::sbuf);
        if norm_type == NormType::RMS_NORM {
            let normed = nl::ndarray([P_MAX, bxs, h1], x.dtype(), buffer = nl::private_hbm);
            rmsnorm_tkg_shard_on_bxs(x, norm_w.unwrap_or(x), normed, eps, hidden_actual, true, true);
            nisa::dma_copy(hidden_sb, normed);
        } else {
            nisa::dma_copy(hidden_sb, x.reshape([bxs, h1, P_MAX]).permute([2, 0, 1]));
        }
        hidden_sb
    }

    /// This program's packed tiles of `hidden_sb` regrouped for `quantize_mx`:
    /// `[128, h1_packed_shard, B·S, 4]`, the 4 values of packed tile `t` at
    /// columns `k·H/512 + t` (the pre-shuffled H's layout).
    #[nki_helper]
    pub fn swizzle_for_quantize(cfg: QkvTkgMxConfig, hidden_sb: Sbuf) -> Sbuf {
        let (bxs, t1, t0) = (cfg.dims.bxs, cfg.h1_packed_shard, cfg.shard_id * cfg.h1_packed_shard);
        let sw = nl::ndarray([P_MAX, t1, bxs, MX_PACK], hidden_sb.dtype(), buffer = nl::sbuf);
        let src = hidden_sb.reshape([P_MAX, bxs, MX_PACK, cfg.h1_packed]).permute([0, 3, 1, 2]);
        nisa::tensor_copy(sw, src[s![.., t0..t0 + t1, .., ..]]);
        sw
    }

    /// One weight block: packed tiles `t0..t0 + n` of the I block `w`
    /// (`[128, tiles, width]` view) into `w_sb`, and their scales (`scales`
    /// `[tiles, quadrant, row in quadrant, width]`) into `ws_sb`, scale row
    /// `16t + 4q + i` at partition `32q + i`.
    #[nki_helper]
    pub fn load_mx_weight_block(w: Hbm, scales: Hbm, w_sb: Sbuf, ws_sb: Sbuf, t0: i64, n: i64) {
        nisa::dma_copy(w_sb[s![.., 0..n, ..]], w[s![.., t0..t0 + n, ..]]);
        for q in 0..NUM_QUADRANTS {
            let p0 = q * QUADRANT;
            nisa::dma_copy(ws_sb[s![p0..p0 + SCALES_PER_QUADRANT, 0..n, ..]], scales[s![t0..t0 + n, q, .., ..]].permute([1, 0, 2]));
        }
    }

    /// `quantize_mx` of the swizzled input into `xq` and its scales `xs`.
    #[nki_helper(target = "trn3")]
    pub fn quantize_hidden_mx(sw: Sbuf, xq: Sbuf, xs: Sbuf) {
        nisa::quantize_mx(xq, sw, xs);
    }

    /// One I block `[i0, i0 + width)` of the projection into a new SBUF tile
    /// `[B·S, width]` of `dtype`: every packed tile's `nc_matmul_mx` into
    /// PSUM, the bias added on program 0, the other program's partial sums
    /// added with two.
    #[nki_helper(target = "trn3")]
    pub fn compute_qkv_mx_i_block(
        cfg: QkvTkgMxConfig,
        xq: Sbuf,
        xs: Sbuf,
        qkv_w: Hbm,
        qkv_w_scale: Hbm,
        qkv_bias: Option<Hbm>,
        dtype: Dtype,
        i0: i64,
        width: i64,
    ) -> Sbuf {
        let (bxs, t1) = (cfg.dims.bxs, cfg.h1_packed_shard);
        let tb = cfg.shard_id * t1;
        // The packed rows as [128, tiles, I]: row t·128 + p at (p, t).
        let w = qkv_w.reshape([cfg.h1_packed, P_MAX, cfg.dims.i]).permute([1, 0, 2])[s![.., .., i0..i0 + width]];
        let ws = qkv_w_scale.reshape([cfg.h1_packed, NUM_QUADRANTS, SCALES_PER_QUADRANT, cfg.dims.i])[s![.., .., .., i0..i0 + width]];
        let psum = nl::ndarray([P_MAX, NUM_PSUM_BANKS, I_TILE_SIZE], nl::float32, buffer = nl::psum);
        for wb in 0..t1.div_ceil(NUM_TILES_PER_WEIGHT_LOAD) {
            let l0 = wb * NUM_TILES_PER_WEIGHT_LOAD;
            let n = (t1 - l0).min(NUM_TILES_PER_WEIGHT_LOAD);
            let w_sb = nl::ndarray([P_MAX, NUM_TILES_PER_WEIGHT_LOAD, width], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
            let ws_sb = nl::ndarray([P_MAX, NUM_TILES_PER_WEIGHT_LOAD, width], nl::uint8, buffer = nl::sbuf);
            load_mx_weight_block(w, ws, w_sb, ws_sb, tb + l0, n);
            for t in 0..n {
                for it in 0..width.div_ceil(I_TILE_SIZE) {
                    let (c0, c1) = (it * I_TILE_SIZE, ((it + 1) * I_TILE_SIZE).min(width));
                    nisa::nc_matmul_mx(
                        psum[s![0..bxs, it, 0..c1 - c0]],
                        xq[s![.., l0 + t, ..]],
                        w_sb[s![.., t, c0..c1]],
                        xs[s![.., l0 + t, ..]],
                        ws_sb[s![.., t, c0..c1]],
                    );
                }
            }
        }
        let out_sb = nl::ndarray([bxs, width], dtype, buffer = nl::sbuf);
        let bias_sb = nl::ndarray([bxs, width], dtype, buffer = nl::sbuf);
        let bias_here = qkv_bias.is_some() && cfg.shard_id == 0;
        if let Some(bias) = qkv_bias {
            if bias_here {
                nisa::dma_copy(bias_sb, bias[s![.., i0..i0 + width]].broadcast(0, bxs));
            }
        }
        for it in 0..width.div_ceil(I_TILE_SIZE) {
            let (c0, c1) = (it * I_TILE_SIZE, ((it + 1) * I_TILE_SIZE).min(width));
            if bias_here {
                nisa::tensor_tensor(out_sb[s![.., c0..c1]], psum[s![0..bxs, it, 0..c1 - c0]], bias_sb[s![.., c0..c1]], nl::add);
            } else {
                nisa::tensor_copy(out_sb[s![.., c0..c1]], psum[s![0..bxs, it, 0..c1 - c0]]);
            }
        }
        sum_lnc_partials(out_sb, cfg.num_shards, cfg.shard_id);
        out_sb
    }

    /// The MX projection of `hidden` `[B, S, H]` (see the module docs) into a
    /// new `[B, S, I]` HBM tensor of the input's dtype.
    #[nki_helper]
    pub fn qkv_tkg_mx_impl(
        hidden: Hbm,
        qkv_w: Hbm,
        qkv_w_scale: Hbm,
        norm_w: Option<Hbm>,
        norm_type: NormType,
        eps: f64,
        qkv_bias: Option<Hbm>,
        hidden_actual: i64,
    ) -> Hbm {
        let cfg = qkv_tkg_mx_config(hidden, qkv_w);
        let bxs: i64 = cfg.dims.bxs;
        let i: i64 = cfg.dims.i;
        let dtype = hidden.dtype();
        let hidden_sb = load_hidden_mx(cfg, hidden.reshape([bxs, cfg.dims.h]), norm_type, norm_w, eps, hidden_actual);
        let sw = swizzle_for_quantize(cfg, hidden_sb);
        let xq = nl::ndarray([P_MAX, cfg.h1_packed_shard, bxs], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([P_MAX, cfg.h1_packed_shard, bxs], nl::uint8, buffer = nl::sbuf);
        quantize_hidden_mx(sw, xq, xs);
        let output = nl::ndarray([bxs, i], dtype, buffer = nl::shared_hbm);
        for ib in 0..i.div_ceil(I_BLOCK_SIZE) {
            let i0 = ib * I_BLOCK_SIZE;
            let width = (i - i0).min(I_BLOCK_SIZE);
            let out_sb = compute_qkv_mx_i_block(cfg, xq, xs, qkv_w, qkv_w_scale, qkv_bias, dtype, i0, width);
            nisa::dma_copy(output[s![.., i0..i0 + width]], out_sb);
        }
        output.reshape([cfg.dims.b, cfg.dims.s, i])
    }
}
