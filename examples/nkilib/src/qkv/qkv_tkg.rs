//! The NKI library's `qkv_tkg`: the fused QKV projection of decode-phase
//! (token generation) hidden states, where `B·S` is at most 128.
//!
//! ```text
//! x   = hidden [B·S, H]
//! (fused_add)  x = hidden + attn_prev + mlp_prev       # also returned, [B, S, H]
//! (norm_type)  x = RMSNorm(x) · gamma  or  LayerNorm(x) · gamma (+ beta)
//! (STATIC)     x = fp8(clip(x / in_scale, ±240))
//! out = x @ qkv_w                                       # [B·S, I], fp32 sums
//! (STATIC)     out[Q | K | V columns] *= w_scale[0 | 1 | 2] · in_scale
//! (ROW)        out *= w_scale                           # per column
//! (qkv_bias)   out += qkv_bias
//! BSD: out as [B, S, I];  NBSd: out as [I / d_head, B, S, d_head]
//! ```
//!
//! Loops and tiling. The hidden dim is laid on the partitions as
//! `[H0 = 128, B·S, H1]` (element `h` of a row at partition `p`, column `c`
//! with `h = shard·H/n + p·H1/n + c % (H1/n)` for `n` LNC shards). With two
//! programs (LNC2) each program holds one of the two hidden shards: it adds
//! the residuals on its columns, normalises them (the row sums exchanged with
//! the other program) and multiplies them with its half of the weight rows;
//! the two partial outputs are exchanged and added.
//!
//! ```text
//! for each I block of up to I_BLOCK_SIZE (8 PSUM banks of I_TILE_SIZE) columns:
//!     out_sb = bias broadcast on the B·S partitions, or zeros
//!     for each H block of up to NUM_TILES_PER_H_BLOCK 128-row tiles:   (process_h_block)
//!         w_sb = the block's weight rows [128, tiles, I block]     # one DMA
//!         for each tile, for each I tile of <= 512 columns:
//!             psum[i tile][f·dim .. f·dim + B·S] += x tileᵀ @ w tile  # PE array tile f
//!     out_sb += every array tile of every psum                       (accumulate_psum_to_output)
//!     (LNC2) out_sb += the other program's out_sb                     # sendrecv
//!     store out_sb in the output layout
//! ```
//!
//! Array tiling: with `B·S <= 32` (64) the 128-column PE array is split into
//! four (two) independent tiles, consecutive hidden tiles going to
//! consecutive array tiles, each accumulating into its own rows of the PSUM
//! tile; the array tiles' partial sums are added at the end. An H remainder
//! block whose tile count the factor does not divide uses the whole array.
//!
//! The kernel takes the library's signature (the library's `sbm` SBUF
//! allocator has no counterpart: tiles are placed by the compiler). The fused
//! norms are the ports of `rmsnorm_tkg` and `layernorm_tkg`, called through
//! their HBM-output helpers into a scratch tensor the projection loads
//! (`fused_norm_and_load`). Quantization: `NONE`, `STATIC` (fp8 weights,
//! the input divided by `qkv_in_scale` and clipped to ±240 in fp8, the Q, K
//! and V columns dequantized by their weight scale times the input scale) and
//! `ROW` (fp8 weights, the 16-bit input as is, each column dequantized by its
//! scale); the bias is added after dequantizing. `MX` (trn3's microscaling)
//! is [`qkv_tkg_mx_impl`](super::qkv_tkg_mx_impl), as in the library; the
//! other MX forms, `output_in_sbuf` and SBUF-resident input are refused by
//! name. The rules are [`qkv_tkg_violation`].

// The library's parameter `load_input_with_DMA_transpose` keeps its spelling.
#![allow(non_snake_case)]

use nki::prelude::*;

use super::qkv_tkg_mx_impl::{H_PER_PACKED_TILE, MX_PACK};
pub use kernel::*;

/// Why a `qkv_tkg` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkvTkgRule {
    /// `H` is not a multiple of the 128 partitions.
    HiddenTiles,
    /// `B·S` is not in `1..=128` (the rows of one matmul).
    Tokens,
    /// The 128-row tiles of `H` do not split evenly over the LNC programs.
    HiddenShards,
    /// The NBSd layout without a `d_head` dividing `I`.
    HeadDim,
    /// `hidden_actual` is outside `1..=H`.
    HiddenActual,
    /// A quantization type the library's `qkv_tkg` does not take (`STATIC_MX`, `ROW_MX`).
    Quantization,
    /// MX quantization with `H` not a multiple of 512 (one packed 128-row tile).
    MxHidden,
    /// MX quantization with `B·S` not a multiple of 4.
    MxTokens,
    /// MX quantization with the NBSd layout (the library's MX form stores BSD).
    MxLayout,
    /// MX quantization with more than one packed tile not splitting over the programs.
    MxShards,
    /// `norm_bias` with a norm other than LayerNorm.
    NormBias,
}

impl QkvTkgRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            QkvTkgRule::HiddenTiles => "H must be a multiple of 128 (the partitions)",
            QkvTkgRule::Tokens => "B * S must be in 1..=128",
            QkvTkgRule::HiddenShards => "H / 128 must split evenly over the LNC programs",
            QkvTkgRule::HeadDim => "the NBSd layout needs a positive d_head dividing I",
            QkvTkgRule::HiddenActual => "hidden_actual must be in 1..=H",
            QkvTkgRule::Quantization => "quantization_type must be NONE, STATIC, ROW or MX",
            QkvTkgRule::MxHidden => "MX quantization needs H to be a multiple of 512",
            QkvTkgRule::MxTokens => "MX quantization needs B * S to be a multiple of 4",
            QkvTkgRule::MxLayout => "MX quantization stores the BSD layout only",
            QkvTkgRule::MxShards => "MX quantization needs H / 512 to be 1 or to split evenly over the LNC programs",
            QkvTkgRule::NormBias => "norm_bias is only used with norm_type=LAYER_NORM",
        }
    }
}

/// A `qkv_tkg` call as the rules see it (`d_head` and `hidden_actual` 0 for none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QkvTkgShape {
    /// `B · S`.
    pub bxs: i64,
    /// `H`.
    pub hidden: i64,
    /// `I`, the fused QKV width.
    pub fused_qkv: i64,
    /// `d_head`, 0 for none.
    pub d_head: i64,
    /// `hidden_actual`, 0 for none.
    pub hidden_actual: i64,
    /// Whether the output layout is NBSd.
    pub nbsd: bool,
    /// Whether `MX` quantization was asked for.
    pub mx_quant: bool,
    /// Whether `STATIC_MX` or `ROW_MX` was asked for.
    pub other_mx_quant: bool,
    /// Whether `norm_bias` is given with a norm other than LayerNorm.
    pub stray_norm_bias: bool,
    /// The programs of the launch (its LNC size).
    pub programs: i64,
}

/// The first rule `c` breaks.
pub const fn qkv_tkg_violation(c: QkvTkgShape) -> Option<QkvTkgRule> {
    if c.hidden <= 0 || c.hidden % P_MAX != 0 {
        return Some(QkvTkgRule::HiddenTiles);
    }
    if c.bxs <= 0 || c.bxs > P_MAX {
        return Some(QkvTkgRule::Tokens);
    }
    if !c.mx_quant && (c.hidden / P_MAX) % c.programs != 0 {
        return Some(QkvTkgRule::HiddenShards);
    }
    if c.nbsd && (c.d_head <= 0 || c.fused_qkv % c.d_head != 0) {
        return Some(QkvTkgRule::HeadDim);
    }
    if c.hidden_actual < 0 || c.hidden_actual > c.hidden {
        return Some(QkvTkgRule::HiddenActual);
    }
    if c.other_mx_quant {
        return Some(QkvTkgRule::Quantization);
    }
    if c.mx_quant {
        let tiles = c.hidden / H_PER_PACKED_TILE;
        if c.hidden % H_PER_PACKED_TILE != 0 {
            return Some(QkvTkgRule::MxHidden);
        }
        if c.bxs % MX_PACK != 0 {
            return Some(QkvTkgRule::MxTokens);
        }
        if c.nbsd {
            return Some(QkvTkgRule::MxLayout);
        }
        if tiles != 1 && tiles % c.programs != 0 {
            return Some(QkvTkgRule::MxShards);
        }
    }
    if c.stray_norm_bias {
        return Some(QkvTkgRule::NormBias);
    }
    None
}

/// The PE array tile width for `bxs` token rows: 32 or 64 columns when the
/// rows fit (four or two independent array tiles), else the whole array.
pub const fn array_tiling_dim(bxs: i64) -> i64 {
    if bxs <= 32 {
        32
    } else if bxs <= 64 {
        64
    } else {
        128
    }
}

/// A `qkv_tkg` call checked at compile time, or a compile error naming the
/// rule it breaks.
///
/// ```
/// let c = nkilib::qkv_tkg_config!(bxs = 4, hidden = 4096, fused_qkv = 896, programs = 1);
/// assert_eq!(c.fused_qkv, 896);
/// ```
///
/// ```compile_fail
/// // 129 tokens do not fit the 128 rows of one matmul.
/// let c = nkilib::qkv_tkg_config!(bxs = 129, hidden = 4096, fused_qkv = 896, programs = 1);
/// ```
#[macro_export]
macro_rules! qkv_tkg_config {
    (bxs = $b:expr, hidden = $h:expr, fused_qkv = $i:expr, programs = $p:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::qkv::qkv_tkg::QkvTkgShape = $crate::qkv::qkv_tkg::QkvTkgShape {
            bxs: $b,
            hidden: $h,
            fused_qkv: $i,
            programs: $p,
            $($field: $v,)*
            ..$crate::qkv::qkv_tkg::QkvTkgShape {
                bxs: 0,
                hidden: 0,
                fused_qkv: 0,
                d_head: 0,
                hidden_actual: 0,
                nbsd: false,
                mx_quant: false,
                other_mx_quant: false,
                stray_norm_bias: false,
                programs: 1,
            }
        };
        const _: () = if let Some(rule) = $crate::qkv::qkv_tkg::qkv_tkg_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel, its tile constants, configuration bundle and phase helpers.
#[nki_module]
pub mod kernel {
    use super::super::qkv_tkg_mx_impl::{qkv_tkg_mx_impl, validate_qkv_tkg_mx};
    pub use crate::qkv::qkv_tkg_common::{I_BLOCK_SIZE, I_TILE_SIZE, NUM_PSUM_BANKS, P_MAX, QkvTkgDims, qkv_tkg_dims, sum_lnc_partials};
    use crate::subkernels::layernorm_tkg::{layernorm_tkg_shard_on_bxs, layernorm_tkg_shard_on_h};
    use crate::subkernels::rmsnorm_tkg::{rmsnorm_tkg_shard_on_bxs, rmsnorm_tkg_shard_on_h};
    pub use crate::utils::common_types::{NormType, QKVOutputLayout, QKVWeightLayout, QuantizationType};
    use nki::prelude::*;

    /// Columns of one fp32 PSUM bank: one matmul's moving free size.
    pub const F_MAX: i64 = nl::tile_size::psum_fmax;
    /// Hidden rows per weight load (one DMA of `[128, 16, I block]`).
    pub const H_BLOCK_SIZE: i64 = 2048;
    /// 128-row hidden tiles per weight load.
    pub const NUM_TILES_PER_H_BLOCK: i64 = 16;
    /// The largest finite `float8_e4m3`: STATIC quantization clips the input to ±this.
    pub const FP8_E4M3_MAX: f64 = 240.0;

    /// The call's dimensions, its program's hidden shard and the array tiling.
    #[nki_object]
    pub struct QkvTkgConfig {
        /// `B`, `S`, `B · S`, `H` and `I`.
        pub dims: QkvTkgDims,
        /// Head size (0 when not given).
        pub d_head: i64,
        /// Query heads (0 when not given; read by STATIC dequantization).
        pub n_q_heads: i64,
        /// Key (and value) heads (0 when not given).
        pub n_kv_heads: i64,
        /// fp8 weights with per-tensor Q, K, V scales and a quantized input.
        pub static_quant: bool,
        /// fp8 weights with a scale per output column.
        pub row_quant: bool,
        /// LNC programs: hidden shards.
        pub num_shards: i64,
        /// This program's shard.
        pub shard_id: i64,
        /// 128-row tiles of the shard.
        pub h1_shard: i64,
        /// PE array tile width of a full H block (32, 64 or 128).
        pub array_tiling_dim: i64,
        /// Array tiles of a full H block: `128 / array_tiling_dim`.
        pub array_tiling_factor: i64,
        /// The same for the remainder H block.
        pub remainder_array_tiling_dim: i64,
        /// Array tiles of the remainder H block.
        pub remainder_array_tiling_factor: i64,
    }

    /// The config of a `[B, S, H]` input and `[H, I]` weights on this launch.
    #[nki_helper]
    pub fn qkv_tkg_config(
        hidden: Hbm,
        qkv_w: Hbm,
        d_head: i64,
        n_q_heads: i64,
        n_kv_heads: i64,
        quantization_type: QuantizationType,
    ) -> QkvTkgConfig {
        let dims: QkvTkgDims = qkv_tkg_dims(hidden, qkv_w);
        let (h, bxs) = (dims.h, dims.bxs);
        let grid = nl::program_ndim() == 1;
        let num_shards = if grid { nl::num_programs(0) } else { 1 };
        let shard_id = if grid { nl::program_id(0) } else { 0 };
        let h1_shard = h / P_MAX / num_shards;
        // The rule of `array_tiling_dim`; NeuronCore-v2 cannot tile 32 columns.
        let fit: i64 = if bxs <= 32 {
            32
        } else if bxs <= 64 {
            64
        } else {
            P_MAX
        };
        let dim: i64 = if nisa::get_nc_version() == nisa::nc_version::gen2 { 64 } else { fit };
        let factor: i64 = P_MAX / dim;
        let rem_tiles = h1_shard % NUM_TILES_PER_H_BLOCK;
        let whole = rem_tiles % factor != 0;
        QkvTkgConfig {
            dims,
            d_head,
            n_q_heads,
            n_kv_heads,
            static_quant: quantization_type == QuantizationType::STATIC,
            row_quant: quantization_type == QuantizationType::ROW,
            num_shards,
            shard_id,
            h1_shard,
            array_tiling_dim: dim,
            array_tiling_factor: factor,
            remainder_array_tiling_dim: if whole { P_MAX } else { dim },
            remainder_array_tiling_factor: if whole { 1 } else { factor },
        }
    }

    /// `hidden + attn_prev + mlp_prev` into a new `[B, S, H]` HBM tensor: one
    /// DMA reduction over this program's hidden shard (all of it on one program).
    #[nki_helper]
    pub fn fused_residual_add_hbm2hbm(cfg: QkvTkgConfig, hidden: Hbm, attn_prev: Hbm, mlp_prev: Hbm) -> Hbm {
        let (bxs, h, n) = (cfg.dims.bxs, cfg.dims.h, cfg.num_shards);
        let fused = nl::ndarray([bxs, h], hidden.dtype(), buffer = nl::shared_hbm);
        let (w, c0) = (h / n, cfg.shard_id * (h / n));
        let srcs = [
            hidden.reshape([bxs, h])[s![.., c0..c0 + w]],
            attn_prev.reshape([bxs, h])[s![.., c0..c0 + w]],
            mlp_prev.reshape([bxs, h])[s![.., c0..c0 + w]],
        ];
        nisa::dma_compute(fused[s![.., c0..c0 + w]], srcs, nl::add, scales = [1.0, 1.0, 1.0]);
        fused.reshape([cfg.dims.b, cfg.dims.s, h])
    }

    /// This program's hidden shard of `x` `[B·S, H]` in SBUF as `[128, B·S,
    /// h1_shard]` (the layout of the module docs).
    #[nki_helper]
    pub fn input_load(cfg: QkvTkgConfig, x: Hbm) -> Sbuf {
        let (bxs, h, h2) = (cfg.dims.bxs, cfg.dims.h, cfg.h1_shard);
        let hidden_sb = nl::ndarray([P_MAX, bxs, h2], x.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(hidden_sb, x.ap([[h2, P_MAX], [h, bxs], [1, h2]], offset = cfg.shard_id * (h / cfg.num_shards)));
        hidden_sb
    }

    /// The (optionally normalised) rows `[B·S, H]` as this program's
    /// `[128, B·S, h1_shard]` SBUF tile. The norms write their documented
    /// `[128, B·S, H/128]` layout, whose hidden shards are this kernel's, into
    /// a scratch HBM tensor (with two programs each writes and reads its own
    /// shard, the row sums exchanged).
    #[nki_helper]
    pub fn fused_norm_and_load(
        cfg: QkvTkgConfig,
        x: Hbm,
        norm_type: NormType,
        norm_w: Option<Hbm>,
        norm_bias: Option<Hbm>,
        eps: f64,
        hidden_actual: i64,
    ) -> Sbuf {
        if norm_type == NormType::NO_NORM {
            return input_load(cfg, x);
        }
        let (bxs, h1) = (cfg.dims.bxs, cfg.dims.h / P_MAX);
        let gamma = norm_w.unwrap_or(x);
        let normed = nl::ndarray([P_MAX, bxs, h1], x.dtype(), buffer = nl::private_hbm);
        let sharded = cfg.num_shards == 2;
        if norm_type == NormType::RMS_NORM {
            if sharded {
                rmsnorm_tkg_shard_on_h(x, gamma, normed, eps, hidden_actual);
            } else {
                rmsnorm_tkg_shard_on_bxs(x, gamma, normed, eps, hidden_actual, false, false);
            }
        } else if sharded {
            layernorm_tkg_shard_on_h(x, gamma, norm_bias, normed, eps);
        } else {
            layernorm_tkg_shard_on_bxs(x, gamma, norm_bias, normed, eps);
        }
        let h2 = cfg.h1_shard;
        let hidden_sb = nl::ndarray([P_MAX, bxs, h2], x.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(hidden_sb, normed[s![.., .., cfg.shard_id * h2..(cfg.shard_id + 1) * h2]]);
        hidden_sb
    }

    /// STATIC quantization's scales on every partition, `[128, 4]` fp32:
    /// columns 0..3 the Q, K and V weight scales times the input scale (the
    /// dequantization factors), column 3 the input scale's reciprocal. Scales
    /// given as one row are broadcast.
    #[nki_helper]
    pub fn load_static_quant_scales(qkv_w_scale: Hbm, qkv_in_scale: Hbm) -> Sbuf {
        let scales = nl::ndarray([P_MAX, 4], nl::float32, buffer = nl::sbuf);
        if qkv_w_scale.shape()[0] == 1 {
            nisa::dma_copy(scales[s![.., 0..3]], qkv_w_scale.broadcast(0, P_MAX));
        } else {
            nisa::dma_copy(scales[s![.., 0..3]], qkv_w_scale);
        }
        if qkv_in_scale.shape()[0] == 1 {
            nisa::dma_copy(scales[s![.., 3..4]], qkv_in_scale.broadcast(0, P_MAX));
        } else {
            nisa::dma_copy(scales[s![.., 3..4]], qkv_in_scale);
        }
        nisa::activation(scales[s![.., 0..3]], nl::copy, scales[s![.., 0..3]], scale = scales[s![.., 3..4]]);
        nisa::reciprocal(scales[s![.., 3..4]], scales[s![.., 3..4]]);
        scales
    }

    /// STATIC quantization of the input: `hidden_sb / in_scale` (rounded to
    /// its dtype, in place), clipped to ±`FP8_E4M3_MAX` into a new tile of
    /// the weights' dtype.
    #[nki_helper]
    pub fn quantize_input_static(hidden_sb: Sbuf, scales: Sbuf, quant_dtype: Dtype) -> Sbuf {
        let [p, bxs, h2] = hidden_sb.shape();
        nisa::activation(hidden_sb, nl::copy, hidden_sb, scale = scales[s![.., 3..4]]);
        let q = nl::ndarray([p, bxs, h2], quant_dtype, buffer = nl::sbuf);
        nisa::tensor_scalar(q, hidden_sb, nl::minimum, FP8_E4M3_MAX, op1 = nl::maximum, operand1 = -FP8_E4M3_MAX);
        q
    }

    /// STATIC dequantization of columns `i0..` of the projection in `out_sb`:
    /// the Q, K and V columns times their factors (`scales` columns 0, 1, 2).
    #[nki_helper]
    pub fn static_dequantize(cfg: QkvTkgConfig, out_sb: Sbuf, scales: Sbuf, i0: i64) {
        let (bxs, width, d) = (cfg.dims.bxs, out_sb.shape()[1], cfg.d_head);
        let q_end = (d * cfg.n_q_heads).min(i0 + width) - i0;
        if q_end > 0 {
            let o = out_sb[s![.., 0..q_end]];
            nisa::tensor_scalar(o, o, nl::multiply, scales[s![0..bxs, 0..1]], engine = nisa::engine::vector);
        }
        let k_start = (d * cfg.n_q_heads).max(i0) - i0;
        let k_end = (d * (cfg.n_q_heads + cfg.n_kv_heads)).min(i0 + width) - i0;
        if k_start < k_end {
            let o = out_sb[s![.., k_start..k_end]];
            nisa::activation(o, nl::copy, o, scale = scales[s![0..bxs, 1..2]]);
        }
        let v_start = (d * (cfg.n_q_heads + cfg.n_kv_heads)).max(i0) - i0;
        let v_end = (d * (cfg.n_q_heads + 2 * cfg.n_kv_heads)).min(i0 + width) - i0;
        if v_start < v_end {
            let o = out_sb[s![.., v_start..v_end]];
            nisa::activation(o, nl::copy, o, scale = scales[s![0..bxs, 2..3]]);
        }
    }

    /// ROW dequantization: `out_sb` times the weight scales of its columns
    /// (`w_scale` `[1, width]`, broadcast, or `[128, width]`).
    #[nki_helper]
    pub fn row_dequantize(cfg: QkvTkgConfig, out_sb: Sbuf, w_scale: Hbm) {
        let width = out_sb.shape()[1];
        let scale_sb = nl::ndarray([P_MAX, width], w_scale.dtype(), buffer = nl::sbuf);
        if w_scale.shape()[0] == 1 {
            nisa::dma_copy(scale_sb, w_scale.broadcast(0, P_MAX));
        } else {
            nisa::dma_copy(scale_sb, w_scale);
        }
        nisa::tensor_tensor(out_sb, out_sb, scale_sb[s![0..cfg.dims.bxs, ..]], nl::multiply);
    }

    /// `out_sb` += the bias `[1, width]`, broadcast on its rows (the
    /// quantized forms add it after dequantizing).
    #[nki_helper]
    pub fn apply_bias(out_sb: Sbuf, bias: Hbm) {
        let [bxs, width] = out_sb.shape();
        let bias_sb = nl::ndarray([bxs, width], bias.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(bias_sb, bias.broadcast(0, bxs));
        nisa::tensor_tensor(out_sb, out_sb, bias_sb, nl::add);
    }

    /// One H block: its weight rows loaded (`[128, tiles, I block]` in one
    /// DMA; 32-bit weights, which do not fit a partition at 16 tiles of 4096
    /// columns, in two), then every hidden tile times every I tile into `psum`
    /// (hidden tile `t` on array tile `t % factor`, whose PSUM rows start at
    /// `dim · (t % factor)`).
    #[nki_helper]
    pub fn process_h_block(cfg: QkvTkgConfig, hidden_sb: Sbuf, w: Hbm, psum: Psum, t0: i64, tiles: i64, dim: i64, factor: i64) {
        let iw = w.shape()[2];
        let per_load: i64 = if w.dtype() == nl::float32 { NUM_TILES_PER_H_BLOCK / 2 } else { NUM_TILES_PER_H_BLOCK };
        for l in 0..tiles.div_ceil(per_load) {
            let l0 = l * per_load;
            let n = (tiles - l0).min(per_load);
            let w_sb = nl::ndarray([P_MAX, per_load, iw], w.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(w_sb[s![.., 0..n, ..]], w[s![.., t0 + l0..t0 + l0 + n, ..]]);
            for h1_tile in 0..n / factor {
                for f in 0..factor {
                    let t = h1_tile * factor + f;
                    let r0 = dim * f;
                    for it in 0..iw.div_ceil(I_TILE_SIZE) {
                        let (c0, c1) = (it * I_TILE_SIZE, ((it + 1) * I_TILE_SIZE).min(iw));
                        nisa::nc_matmul(
                            psum[s![r0..r0 + cfg.dims.bxs, it, 0..c1 - c0]],
                            hidden_sb[s![.., .., t0 + l0 + t]],
                            w_sb[s![.., t, c0..c1]],
                            tile_position = (0, r0),
                            tile_size = (P_MAX, dim),
                        );
                    }
                }
            }
        }
    }

    /// `out_sb` `[B·S, I block]` += the array tiles of each I tile's PSUM.
    #[nki_helper]
    pub fn accumulate_psum_to_output(cfg: QkvTkgConfig, out_sb: Sbuf, psum: Psum) {
        let only_remainder = cfg.h1_shard < NUM_TILES_PER_H_BLOCK;
        let dim = if only_remainder { cfg.remainder_array_tiling_dim } else { cfg.array_tiling_dim };
        let factor = if only_remainder { cfg.remainder_array_tiling_factor } else { cfg.array_tiling_factor };
        let iw = out_sb.shape()[1];
        for it in 0..iw.div_ceil(I_TILE_SIZE) {
            let (c0, c1) = (it * I_TILE_SIZE, ((it + 1) * I_TILE_SIZE).min(iw));
            for f in 0..factor {
                let r0 = dim * f;
                let o = out_sb[s![.., c0..c1]];
                nisa::tensor_tensor(o, o, psum[s![r0..r0 + cfg.dims.bxs, it, 0..c1 - c0]], nl::add);
            }
        }
    }

    /// One I block `[i0, i0 + width)` of the projection into a new SBUF tile
    /// `[B·S, width]` of `dtype`: bias (on program 0) or zeros, every H
    /// block's products, (quantized) the dequantization and then the bias, and
    /// with two programs the other program's partial sums. `quant_scales` are
    /// STATIC quantization's (read only with it).
    #[nki_helper]
    pub fn compute_qkv_i_block(
        cfg: QkvTkgConfig,
        hidden_sb: Sbuf,
        w: Hbm,
        qkv_bias: Option<Hbm>,
        quant_scales: Sbuf,
        w_scale: Option<Hbm>,
        dtype: Dtype,
        i0: i64,
        width: i64,
    ) -> Sbuf {
        let bxs = cfg.dims.bxs;
        let out_sb = nl::ndarray([bxs, width], dtype, buffer = nl::sbuf);
        let quantized = cfg.static_quant || cfg.row_quant;
        let bias_here = qkv_bias.is_some() && cfg.shard_id == 0 && !quantized;
        if !bias_here {
            nisa::memset(out_sb, 0.0);
        }
        if let Some(bias) = qkv_bias {
            if bias_here {
                nisa::dma_copy(out_sb, bias[s![.., i0..i0 + width]].broadcast(0, bxs));
            }
        }
        // Every bank of the block: [128 rows, I tiles, 512 columns] of fp32.
        let psum = nl::ndarray([P_MAX, NUM_PSUM_BANKS, I_TILE_SIZE], nl::float32, buffer = nl::psum);
        let wb = w[s![.., .., i0..i0 + width]];
        let full = cfg.h1_shard / NUM_TILES_PER_H_BLOCK;
        for hb in 0..full {
            process_h_block(
                cfg,
                hidden_sb,
                wb,
                psum,
                hb * NUM_TILES_PER_H_BLOCK,
                NUM_TILES_PER_H_BLOCK,
                cfg.array_tiling_dim,
                cfg.array_tiling_factor,
            );
        }
        let rem = cfg.h1_shard - full * NUM_TILES_PER_H_BLOCK;
        if rem > 0 {
            let (dim, factor) = (cfg.remainder_array_tiling_dim, cfg.remainder_array_tiling_factor);
            process_h_block(cfg, hidden_sb, wb, psum, full * NUM_TILES_PER_H_BLOCK, rem, dim, factor);
        }
        accumulate_psum_to_output(cfg, out_sb, psum);
        if cfg.static_quant {
            static_dequantize(cfg, out_sb, quant_scales, i0);
        }
        if let Some(ws) = w_scale {
            if cfg.row_quant {
                row_dequantize(cfg, out_sb, ws[s![.., i0..i0 + width]]);
            }
        }
        if let Some(bias) = qkv_bias {
            if quantized && cfg.shard_id == 0 {
                apply_bias(out_sb, bias[s![.., i0..i0 + width]]);
            }
        }
        sum_lnc_partials(out_sb, cfg.num_shards, cfg.shard_id);
        out_sb
    }

    /// `out_sb` (columns `i0..i0 + width` of the `[B·S, I]` projection) into
    /// `output`: `[B·S, I]` (BSD) or head by head into `[I/d_head, B·S, d_head]` (NBSd).
    #[nki_helper]
    pub fn store_qkv_output_to_hbm(cfg: QkvTkgConfig, output: Hbm, out_sb: Sbuf, i0: i64, width: i64, nbsd: bool) {
        if nbsd {
            let d = cfg.d_head;
            for n in i0 / d..(i0 + width) / d {
                let c0 = n * d - i0;
                nisa::dma_copy(output[s![n, .., ..]], out_sb[s![.., c0..c0 + d]]);
            }
        } else {
            nisa::dma_copy(output[s![.., i0..i0 + width]], out_sb);
        }
    }

    /// The projection of this program's `hidden_sb` into a new HBM output of
    /// `dtype`, I block by I block, in `output_layout`.
    #[nki_helper]
    pub fn qkv_projection_hbm_output(
        cfg: QkvTkgConfig,
        hidden_sb: Sbuf,
        qkv_w: Hbm,
        qkv_bias: Option<Hbm>,
        quant_scales: Sbuf,
        w_scale: Option<Hbm>,
        dtype: Dtype,
        nbsd: bool,
    ) -> Hbm {
        let (bxs, i, d) = (cfg.dims.bxs, cfg.dims.i, cfg.d_head);
        let output = if nbsd {
            nl::ndarray([i / d, bxs, d], dtype, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bxs, i], dtype, buffer = nl::shared_hbm)
        };
        // The program's weight rows as [128, h1_shard, I], in the input's layout.
        let h2 = cfg.h1_shard;
        let w = qkv_w.reshape([cfg.num_shards, P_MAX, h2, i])[s![cfg.shard_id, .., .., ..]];
        for ib in 0..i.div_ceil(I_BLOCK_SIZE) {
            let i0 = ib * I_BLOCK_SIZE;
            let width = (i - i0).min(I_BLOCK_SIZE);
            let out_sb = compute_qkv_i_block(cfg, hidden_sb, w, qkv_bias, quant_scales, w_scale, dtype, i0, width);
            store_qkv_output_to_hbm(cfg, output, out_sb, i0, width, nbsd);
        }
        if nbsd {
            return output.reshape([i / d, cfg.dims.b, cfg.dims.s, d]);
        }
        output.reshape([cfg.dims.b, cfg.dims.s, i])
    }

    /// STATIC quantization around the projection: the scales loaded, the
    /// input quantized, the projection dequantized block by block.
    #[nki_helper]
    pub fn qkv_projection_static(
        cfg: QkvTkgConfig,
        hidden_sb: Sbuf,
        qkv_w: Hbm,
        qkv_bias: Option<Hbm>,
        qkv_w_scale: Hbm,
        qkv_in_scale: Hbm,
        dtype: Dtype,
        nbsd: bool,
    ) -> Hbm {
        let scales = load_static_quant_scales(qkv_w_scale, qkv_in_scale);
        let hidden_q = quantize_input_static(hidden_sb, scales, qkv_w.dtype());
        qkv_projection_hbm_output(cfg, hidden_q, qkv_w, qkv_bias, scales, None, dtype, nbsd)
    }

    /// The library's checks, by parameter name, when the kernel is traced.
    #[nki_helper]
    pub fn validate_qkv_tkg(
        hidden: Hbm,
        qkv_w: Hbm,
        residual: QkvTkgFusedAdd,
        norm_type: NormType,
        norm_w: Option<Hbm>,
        biases: QkvTkgBiases,
        output_layout: QKVOutputLayout,
        d_head: i64,
        hidden_actual: i64,
    ) {
        let (norm_bias, qkv_bias) = (biases.norm_bias, biases.qkv_bias);
        assert!(hidden.ndim() == 3, "qkv_tkg: hidden must be [B, S, H] in HBM, got {} dims", hidden.ndim());
        let [b, s, h] = hidden.shape();
        let w_shape = qkv_w.shape();
        assert!(qkv_w.ndim() == 2 && w_shape[0] == h, "qkv_tkg: qkv_w must be [H, I] with H = {h}, got {w_shape}");
        let i = w_shape[1];
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        // The rules of `qkv_tkg_violation`.
        assert!(h % P_MAX == 0, "qkv_tkg: hidden: H = {h} must be a multiple of 128 (the partitions)");
        assert!(b * s >= 1 && b * s <= P_MAX, "qkv_tkg: hidden: B * S = {} must be in 1..=128", b * s);
        assert!((h / P_MAX) % programs == 0, "qkv_tkg: H / 128 = {} must split evenly over the {programs} LNC programs", h / P_MAX);
        assert!(output_layout != QKVOutputLayout::NBdS, "qkv_tkg: output_layout NBdS is not supported (BSD or NBSd)");
        let nbsd = output_layout == QKVOutputLayout::NBSd;
        assert!(!nbsd || (d_head > 0 && i % d_head == 0), "qkv_tkg: d_head must be given and divide I = {i} for the NBSd output layout");
        assert!(
            hidden_actual >= 1 && hidden_actual <= h,
            "qkv_tkg: hidden_actual must be in 1..=H = {h}, got hidden_actual = {hidden_actual}"
        );
        assert!(norm_type != NormType::RMS_NORM_SKIP_GAMMA, "qkv_tkg: norm_type RMS_NORM_SKIP_GAMMA is not supported");
        assert!(norm_type == NormType::LAYER_NORM || norm_bias.is_none(), "qkv_tkg: norm_bias is only used with norm_type=LAYER_NORM");
        assert!(norm_type == NormType::NO_NORM || norm_w.is_some(), "qkv_tkg: norm_w must be given for RMS_NORM and LAYER_NORM");
        let given = residual.mlp_prev.is_some() && residual.attn_prev.is_some();
        assert!(!residual.fused_add || given, "qkv_tkg: fused_add needs mlp_prev and attn_prev");
        if let Some(bias) = qkv_bias {
            let bs = bias.shape();
            assert!(bias.ndim() == 2 && bs[0] == 1 && bs[1] == i, "qkv_tkg: qkv_bias must be [1, I] = [1, {i}], got {bs}");
        }
    }

    /// The fused residual add before the norm: `hidden + attn_prev + mlp_prev`.
    #[nki_object]
    pub struct QkvTkgFusedAdd {
        /// Whether the residuals are added (and the sum returned).
        #[default(false)]
        pub fused_add: bool,
        /// The MLP's previous output, like `hidden`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub mlp_prev: Option<Hbm>,
        /// The attention's previous output, like `hidden`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub attn_prev: Option<Hbm>,
    }

    /// The heads of the projection's columns (needed by `NBSd` and `STATIC`).
    #[nki_params]
    pub struct QkvTkgHeads {
        /// The head dim.
        pub d_head: Option<i64>,
        /// Key/value heads.
        pub num_kv_heads: Option<i64>,
        /// Query heads.
        pub num_q_heads: Option<i64>,
    }

    /// The weights' quantization and its scales.
    #[nki_object]
    pub struct QkvTkgQuantization {
        /// `NONE`, `STATIC`, `ROW` or `MX`.
        #[default(QuantizationType::NONE)]
        pub quantization_type: QuantizationType,
        /// `MX`: `hidden`'s `H` dim pre-shuffled (the MX form requires it).
        #[default(false)]
        pub is_h_dim_4h_transposed: bool,
        /// The weights' dequantization scale (`MX`: `uint8` block scales).
        #[dtypes(float32, uint8)]
        #[default(None)]
        pub qkv_w_scale: Option<Hbm>,
        /// `STATIC`: the input's dequantization scale.
        #[dtypes(float32)]
        #[default(None)]
        pub qkv_in_scale: Option<Hbm>,
    }

    /// The projection's and the LayerNorm's biases.
    #[nki_object]
    pub struct QkvTkgBiases {
        /// `[1, I]`, added to the projection.
        #[dtypes(float32, bfloat16, float16)]
        pub qkv_bias: Option<Hbm>,
        /// `[1, H]`, the LayerNorm's beta.
        #[dtypes(float32, bfloat16, float16)]
        pub norm_bias: Option<Hbm>,
    }

    /// The quantization inputs the library requires, by parameter name.
    #[nki_helper]
    pub fn validate_quantization(hidden_dtype: Dtype, qkv_w: Hbm, quant: QkvTkgQuantization, d_head: i64, n_q_heads: i64, n_kv_heads: i64) {
        let quantization_type = quant.quantization_type;
        let (qkv_w_scale, qkv_in_scale) = (quant.qkv_w_scale, quant.qkv_in_scale);
        let i = qkv_w.shape()[1];
        let is_static = quantization_type == QuantizationType::STATIC;
        let is_row = quantization_type == QuantizationType::ROW;
        assert!(
            quantization_type == QuantizationType::NONE || is_static || is_row,
            "qkv_tkg: quantization_type must be NONE, STATIC, ROW or MX"
        );
        let quantized = is_static || is_row;
        assert!(
            quantized == (qkv_w.dtype() == nl::float8_e4m3),
            "qkv_tkg: qkv_w must be float8_e4m3 exactly when quantization_type is STATIC or ROW"
        );
        assert!(
            !is_row || hidden_dtype != nl::float32,
            "qkv_tkg: hidden must be bfloat16 or float16 for ROW quantization (the input multiplies the fp8 weights), got float32"
        );
        assert!(!quantized || qkv_w_scale.is_some(), "qkv_tkg: qkv_w_scale must be given for STATIC and ROW quantization");
        assert!(!is_static || qkv_in_scale.is_some(), "qkv_tkg: qkv_in_scale must be given for STATIC quantization");
        assert!(
            !is_static || (d_head > 0 && n_q_heads > 0 && n_kv_heads >= 0),
            "qkv_tkg: d_head, num_q_heads and num_kv_heads must be given for STATIC quantization"
        );
        if let Some(ws) = qkv_w_scale {
            let cols = if is_static { 3 } else { i };
            let r = ws.shape()[0];
            if quantized {
                assert!(
                    ws.ndim() == 2 && (r == 1 || r == P_MAX) && ws.shape()[1] == cols,
                    "qkv_tkg: qkv_w_scale must be [1, {cols}] or [128, {cols}], got {}",
                    ws.shape()
                );
            }
        }
        if let Some(ins) = qkv_in_scale {
            let r = ins.shape()[0];
            if is_static {
                assert!(
                    ins.ndim() == 2 && (r == 1 || r == P_MAX) && ins.shape()[1] == 1,
                    "qkv_tkg: qkv_in_scale must be [1, 1] or [128, 1], got {}",
                    ins.shape()
                );
            }
        }
    }

    /// The fused QKV projection of `hidden` `[B, S, H]` with `qkv_w` `[H, I]`
    /// (see the module docs). Returns the projection, `[B, S, I]` (BSD) or
    /// `[I/d_head, B, S, d_head]` (NBSd), and with `fused_add` also the
    /// residual sum `hidden + attn_prev + mlp_prev` `[B, S, H]`.
    #[nki_kernel]
    pub fn qkv_tkg(
        #[dtypes(float32, bfloat16, float16)] hidden: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float8_e4m3fn_x4)] qkv_w: Hbm,
        #[dtypes(float32, bfloat16, float16)] norm_w: Option<Hbm>,
        #[spread] residual: QkvTkgFusedAdd,
        #[spread] _: QkvTkgHeads,
        #[default(QKVOutputLayout::BSD)] output_layout: QKVOutputLayout,
        #[default(1e-6)] eps: f64,
        #[default(NormType::RMS_NORM)] norm_type: NormType,
        #[spread] quant: QkvTkgQuantization,
        #[default(false)] output_in_sbuf: bool,
        #[spread] biases: QkvTkgBiases,
        hidden_actual: Option<i64>,
    ) -> Outputs {
        assert!(!output_in_sbuf, "qkv_tkg: output_in_sbuf is not supported (the output is stored to HBM)");
        let (dh, nq, nkv) = (d_head.unwrap_or(0), num_q_heads.unwrap_or(0), num_kv_heads.unwrap_or(0));
        let h = hidden.shape()[2];
        let ha = hidden_actual.unwrap_or(h);
        if quantization_type == QuantizationType::MX {
            let nbsd = output_layout == QKVOutputLayout::NBSd;
            validate_qkv_tkg_mx(hidden, qkv_w, qkv_w_scale, fused_add, norm_type, nbsd, is_h_dim_4h_transposed);
            assert!(norm_bias.is_none(), "qkv_tkg: norm_bias is not supported with MX quantization");
            assert!(norm_type == NormType::NO_NORM || norm_w.is_some(), "qkv_tkg: norm_w must be given for RMS_NORM");
            assert!(ha >= 1 && ha <= h, "qkv_tkg: hidden_actual must be in 1..=H = {h}, got hidden_actual = {ha}");
            if let Some(bias) = qkv_bias {
                let (bs, i) = (bias.shape(), qkv_w.shape()[1]);
                assert!(bias.ndim() == 2 && bs[0] == 1 && bs[1] == i, "qkv_tkg: qkv_bias must be [1, I] = [1, {i}], got {bs}");
            }
            // Validated: qkv_w_scale is given.
            let ws = qkv_w_scale.unwrap_or(qkv_w);
            return Outputs(qkv_tkg_mx_impl(hidden, qkv_w, ws, norm_w, norm_type, eps, qkv_bias, ha));
        }
        validate_quantization(hidden.dtype(), qkv_w, quant, dh, nq, nkv);
        validate_qkv_tkg(hidden, qkv_w, residual, norm_type, norm_w, biases, output_layout, dh, ha);
        let cfg = qkv_tkg_config(hidden, qkv_w, dh, nq, nkv, quantization_type);
        let x: Hbm = if fused_add {
            fused_residual_add_hbm2hbm(cfg, hidden, attn_prev.unwrap_or(hidden), mlp_prev.unwrap_or(hidden))
        } else {
            hidden.reshape([cfg.dims.bxs, h])
        };
        let hidden_sb = fused_norm_and_load(cfg, x.reshape([cfg.dims.bxs, h]), norm_type, norm_w, norm_bias, eps, ha);
        let (dtype, nbsd) = (hidden.dtype(), output_layout == QKVOutputLayout::NBSd);
        // Validated: both scales are given for STATIC quantization.
        let output: Hbm = if cfg.static_quant {
            qkv_projection_static(cfg, hidden_sb, qkv_w, qkv_bias, qkv_w_scale.unwrap_or(qkv_w), qkv_in_scale.unwrap_or(qkv_w), dtype, nbsd)
        } else {
            // Without STATIC quantization `quant_scales` is not read: hidden_sb stands in.
            qkv_projection_hbm_output(cfg, hidden_sb, qkv_w, qkv_bias, hidden_sb, qkv_w_scale, dtype, nbsd)
        };
        if fused_add {
            return Outputs(output, x);
        }
        Outputs(output)
    }
}
