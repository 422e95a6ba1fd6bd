//! The MX (OCP microscaling, trn3) form of the decode path: the library's
//! `mlp_tkg_mx`, for `quantization_type = MX` with MXFP4 or MXFP8 weights
//! (`float4_e2m1fn_x4`, `float8_e4m3fn_x4`, `float8_e5m2_x4`) and `uint8`
//! block scales; the activations are quantized on chip to MXFP8 by
//! `quantize_mx` and every projection is an `nc_matmul_mx`.
//!
//! ```text
//! (RMS_NORM*) x = RMSNorm(hidden) · gamma          [128, T, H/128], hidden's dtype
//! x_sh = this program's MX tiles of x              [128, H/512/n, T4, 4]   (T4: T padded to 4)
//! xq, xs = quantize_mx(x_sh)                       MXFP8 + one scale per 8 partitions x 4 values
//! gate = Σ_tiles nc_matmul_mx(W_gate, xq)          [128, I/512, T4, 4] bf16 (+ gate bias)
//! (n = 2) gate += the other program's gate         # sendrecv
//! gate = act(gate)
//! up   = the same with W_up (+ up bias)
//! gu = gate · up; gq, gs = quantize_mx(gu)
//! for each 128-column tile c of this program's hidden shard:
//!     out[:, c, :] = Σ_I tiles nc_matmul_mx(W_down[.., c], gq) (+ down bias)   [128, T4] bf16
//! output[:, shard] = outᵀ                          in the output dtype
//! ```
//!
//! Layouts (the library's). `H` is pre-shuffled: position `k·H/4 + t·128 +
//! p` of a hidden row (and of gamma) is value `k` of packed row `p` of MX
//! tile `t`, the rows `[128, H/512, I]` of the gate and up weights (scales
//! `[16, H/512, I]`, one per 8 packed rows). The gate/up product's column
//! `it·512 + j·w/4 + p` (`w` the columns of tile `it`) sits at `(p, it, ·,
//! j)`, value `j` of packed row `p` of tile `it` of the down weights
//! `[I_p, I/512, H]` (`I_p = I/4` below 512 columns, else 128; scales
//! `[I_p/8, I/512, H]`); the gate and up biases are `[I_p, I/512, 4]` in that
//! layout, the down bias `[1, H]`. With two programs each takes half of the
//! MX tiles of `H` for the gate/up sums (exchanged and added) and half of
//! the output columns. All sums land in bfloat16 PSUM, as in the library.

pub use kernel::*;

/// The MX decode path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPParameters, MLPQuantizationParameters, MLPTensors};
    use crate::mlp::mlp_tkg::down_projection_mx_shard_h::down_projection_mx_tp_shard_h;
    use crate::mlp::mlp_tkg::gate_up_projection_mx_shard_h::gate_up_projection_mx_tp_shard_h;
    use crate::mlp::mlp_tkg::mlp_tkg_utils::unit_gamma;
    use crate::mlp::mlp_tkg::projection_mx_constants::{ProjConfig, proj_config};
    use crate::subkernels::rmsnorm_tkg::rmsnorm_tkg_shard_on_bxs;
    pub use crate::utils::common_types::{ActFnType, NormType};
    use crate::utils::kernel_helpers::{ClampLimits, apply_activation, clamp};
    use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

    /// The library's `_layout_adapter_hbm` and `_layout_adapter_sb`: this
    /// program's MX tiles of the (RMS-normalised) rows `hidden` `[T, H]` as
    /// `[128, H/512/n, T4, 4]`, element `(p, t, r, k)` position `k·H/4 +
    /// (t0 + t)·128 + p` of row `r`; the padding rows zero.
    #[nki_helper]
    pub fn layout_adapter_mx(hidden: Hbm, norm: bool, gamma: Option<Hbm>, eps: f64, t: i64, cfg: ProjConfig) -> Sbuf {
        let (h, n) = (cfg.h, cfg.n_h512_tile_sharded);
        let t0 = cfg.prg_id * n;
        let sw = nl::ndarray([H0, n, cfg.bxs, MX_PACK], hidden.dtype(), buffer = nl::sbuf);
        if cfg.bxs > t {
            nisa::memset(sw[s![.., .., t..cfg.bxs, ..]], 0.0);
        }
        let dst = sw[s![.., .., 0..t, ..]];
        if norm {
            let h1 = h / H0;
            let normed = nl::ndarray([H0, t, h1], hidden.dtype(), buffer = nl::private_hbm);
            if let Some(g) = gamma {
                rmsnorm_tkg_shard_on_bxs(hidden, g, normed, eps, h, true, true);
            } else {
                rmsnorm_tkg_shard_on_bxs(hidden, unit_gamma(hidden.dtype(), h), normed, eps, h, true, true);
            }
            nisa::dma_copy(dst, normed.ap([[t * h1, H0], [1, n], [h1, t], [cfg.n_h512_tile, MX_PACK]], offset = t0));
        } else {
            nisa::dma_copy(dst, hidden.ap([[1, H0], [H0, n], [h, t], [h / MX_PACK, MX_PACK]], offset = t0 * H0));
        }
        sw
    }

    /// `quantize_mx` of the adapted rows into `xq` and its scales `xs`.
    #[nki_helper(target = "trn3")]
    pub fn quantize_hidden_mx(sw: Sbuf, xq: Sbuf, xs: Sbuf) {
        nisa::quantize_mx(xq, sw, xs);
    }

    /// This program's `[128, H1s, T4]` output tiles transposed into its
    /// columns of `output` `[T, H]`, in the output's dtype.
    #[nki_helper]
    pub fn store_output_mx(out_sb: Sbuf, output: Hbm, t: i64, cfg: ProjConfig) {
        let cast = nl::ndarray([H0, cfg.h1_sharded, t], output.dtype(), buffer = nl::sbuf);
        nisa::tensor_copy(cast, out_sb[s![.., .., 0..t]]);
        let c0 = cfg.prg_id * cfg.h_sharded;
        nisa::dma_copy(output.ap([[1, H0], [H0, cfg.h1_sharded], [cfg.h, t]], offset = c0), cast);
    }

    /// The MX decode-phase MLP of `p.hidden` `[T, H]` into `p.output` `[T,
    /// H]`: the phases of the module docs in order; `RMS_NORM_SKIP_GAMMA` is
    /// `RMS_NORM` with a gamma of ones. (`mlp`'s MX rules refuse clamps and
    /// `skip_gate_proj`.)
    #[nki_helper]
    pub fn mlp_tkg_mx(p: MLPParameters) {
        let (hidden, w, quant) = (p.hidden, p.w, p.quant);
        let [t, h] = hidden.shape();
        let i = w.gate_proj_weights_tensor.shape()[2];
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shard_id = if n > 1 { nl::program_id(0) } else { 0 };
        let cfg = proj_config(h, i, t.div_ceil(MX_PACK) * MX_PACK, n, shard_id);
        let norm = p.normalization_type != NormType::NO_NORM;
        let sw = layout_adapter_mx(hidden, norm, w.normalization_weights_tensor, p.eps, t, cfg);
        let xq = nl::ndarray([H0, cfg.n_h512_tile_sharded, cfg.bxs], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([H0, cfg.n_h512_tile_sharded, cfg.bxs], nl::uint8, buffer = nl::sbuf);
        quantize_hidden_mx(sw, xq, xs);
        let gu = gate_up_product_mx(xq, xs, w, quant, p.act, nl::bfloat16, cfg);
        // The scales are checked present before the path runs.
        let down_scale = quant.down_w_scale;
        let down_s = down_scale.unwrap_or(hidden);
        let out_sb = down_projection_mx_tp_shard_h(gu, w.down_proj_weights_tensor, down_s, w.down_proj_bias_tensor, cfg);
        store_output_mx(out_sb, p.output, t, cfg);
    }

    /// The gated product `act(clamp(gate)) · clamp(up)` of the quantized
    /// rows `xq`/`xs` as `[128, I/512, T4, 4]` in `dtype` (the layout the
    /// down projection quantizes), each projection with its bias; the
    /// scales in `quant` must be given.
    #[nki_helper]
    pub fn gate_up_product_mx(
        xq: Sbuf,
        xs: Sbuf,
        w: MLPTensors,
        quant: MLPQuantizationParameters,
        act: MLPActivationParameters,
        dtype: Dtype,
        cfg: ProjConfig,
    ) -> Sbuf {
        let fallback = w.gate_proj_weights_tensor;
        let (gate_scale, up_scale) = (quant.gate_w_scale, quant.up_w_scale);
        let (gate_s, up_s) = (gate_scale.unwrap_or(fallback), up_scale.unwrap_or(fallback));
        let c = act.clamps;
        let gate: Sbuf = gate_up_projection_mx_tp_shard_h(xq, xs, w.gate_proj_weights_tensor, gate_s, w.gate_proj_bias_tensor, cfg);
        clamp(gate, c.gate_clamp_upper_limit, c.gate_clamp_lower_limit);
        apply_activation(gate, gate, act.activation_fn);
        let up = gate_up_projection_mx_tp_shard_h(xq, xs, w.up_proj_weights_tensor, up_s, w.up_proj_bias_tensor, cfg);
        clamp(up, c.up_clamp_upper_limit, c.up_clamp_lower_limit);
        let gu = nl::ndarray(gate.shape(), dtype, buffer = nl::sbuf);
        nisa::tensor_tensor(gu, gate, up, nl::multiply);
        gu
    }
}
