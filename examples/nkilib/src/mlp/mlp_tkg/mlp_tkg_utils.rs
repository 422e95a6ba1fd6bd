//! The decode path's input phases: the library's `mlp_tkg_utils`, the fused
//! residual add and the (normalised) load of this program's hidden shard;
//! and what the projections share on the way out: the fp8 dequantizing
//! read-out of their sums and the transposed store.

pub use kernel::*;

/// The input helpers.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{MLPTKGConstants, ProjectionWeights};
    use crate::subkernels::layernorm_tkg::{layernorm_tkg_shard_on_bxs, layernorm_tkg_shard_on_h, layernorm_tkg_splits_rows};
    use crate::subkernels::norm_tkg_utils::load_input_to_sbuf;
    use crate::subkernels::rmsnorm_tkg::{rmsnorm_tkg_shard_on_bxs, rmsnorm_tkg_shard_on_h, rmsnorm_tkg_splits_rows};
    pub use crate::utils::common_types::NormType;
    use nki::prelude::*;

    /// The residual add `x = hidden + fused_add_tensor` (`[T, H]` each, tokens
    /// on the partitions) in hidden's dtype, written to `fused_output` for the
    /// phases after it and, when `stored` is given, this program's hidden shard
    /// of it to `stored` (in its dtype).
    #[nki_helper]
    pub fn input_fused_add(hidden: Hbm, fused_add_tensor: Hbm, fused_output: Hbm, stored: Option<Hbm>, dims: MLPTKGConstants) {
        let (t, h) = (dims.t, dims.h);
        let x = nl::ndarray([t, h], hidden.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(x, hidden);
        let r = nl::ndarray([t, h], fused_add_tensor.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(r, fused_add_tensor);
        nisa::tensor_tensor(x, x, r, nl::add);
        nisa::dma_copy(fused_output, x);
        if let Some(out) = stored {
            let (c0, hs) = (dims.shard_id * dims.h_per_shard, dims.h_per_shard);
            let cast = nl::ndarray([t, hs], out.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(cast, x[s![.., c0..c0 + hs]]);
            nisa::dma_copy(out[s![.., c0..c0 + hs]], cast);
        }
    }

    /// The rows of `hidden` `[T, H]` normalised into `normed` `[128, T, H1]`
    /// (the layout of `n` hidden shards) with the norm kernels' helpers, as
    /// the library's `rmsnorm_tkg` / `layernorm_tkg` run them: every program
    /// normalises every row over the whole hidden dim. Where the library
    /// splits the rows between two programs (more than the norm's
    /// `SHARDING_THRESHOLD`, an even count) the two split the hidden dim
    /// instead (`shard_on_h`), each writing its own shard and exchanging the
    /// partial sums: each program's scratch is private here, so it could not
    /// receive the other program's rows.
    #[nki_helper]
    pub fn normalize_rows(hidden: Hbm, gamma: Hbm, beta: Option<Hbm>, normed: Hbm, layer: bool, eps: f64, dims: MLPTKGConstants) {
        let (n, t) = (dims.num_shards, dims.t);
        let split_rows = if layer { layernorm_tkg_splits_rows(t, n) } else { rmsnorm_tkg_splits_rows(t, n) };
        if layer && split_rows {
            layernorm_tkg_shard_on_h(hidden, gamma, beta, normed, eps);
        } else if layer {
            layernorm_tkg_shard_on_bxs(hidden, gamma, beta, normed, eps);
        } else if split_rows {
            rmsnorm_tkg_shard_on_h(hidden, gamma, normed, eps, dims.h);
        } else {
            rmsnorm_tkg_shard_on_bxs(hidden, gamma, normed, eps, dims.h, false, false);
        }
    }

    /// A `[1, H]` gamma of ones in `dtype` (private HBM): `RMS_NORM_SKIP_GAMMA`
    /// is RMSNorm with it.
    #[nki_helper]
    pub fn unit_gamma(dtype: Dtype, h: i64) -> Hbm {
        let ones_sb = nl::ndarray([1, h], dtype, buffer = nl::sbuf);
        nisa::memset(ones_sb, 1.0);
        let ones = nl::ndarray([1, h], dtype, buffer = nl::private_hbm);
        nisa::dma_copy(ones, ones_sb);
        ones
    }

    /// This program's hidden shard of the (normalised) rows of `hidden` `[T,
    /// H]` into `x_sb` `[128, T, H1s]`. A norm writes every row into a
    /// private `[128, T, H1]` scratch first ([`normalize_rows`]).
    #[nki_helper]
    pub fn input_norm_load(
        hidden: Hbm,
        x_sb: Sbuf,
        normalization_type: NormType,
        norm_weights: Option<Hbm>,
        norm_bias: Option<Hbm>,
        eps: f64,
        dims: MLPTKGConstants,
    ) {
        let t = dims.t;
        if normalization_type == NormType::NO_NORM {
            load_input_to_sbuf(hidden, x_sb, 0, t, dims.num_shards, dims.shard_id, 1, false);
        } else {
            let normed = nl::ndarray([H0, t, dims.h1], hidden.dtype(), buffer = nl::private_hbm);
            let layer = normalization_type == NormType::LAYER_NORM;
            if let Some(gamma) = norm_weights {
                normalize_rows(hidden, gamma, norm_bias, normed, layer, eps, dims);
            } else {
                normalize_rows(hidden, unit_gamma(hidden.dtype(), dims.h), norm_bias, normed, layer, eps, dims);
            }
            let c0 = dims.shard_id * dims.h1_shard;
            nisa::dma_copy(x_sb, normed[s![.., .., c0..c0 + dims.h1_shard]]);
        }
    }

    /// `out` `[128, H1s, T]` (element `(p, c, t)` the shard's hidden column
    /// `p · H1s + c`) into this program's hidden shard of `output` `[T, H]`:
    /// each layout column `[128, T]` transposed on the PE array (exactly)
    /// into the rows `[T, H/n]`, cast to the output's dtype, stored at once.
    #[nki_helper]
    pub fn transpose_store(out: Sbuf, output: Hbm, dims: MLPTKGConstants) {
        let (t, hs, h1s) = (dims.t, dims.h_per_shard, dims.h1_shard);
        let c_shard = dims.shard_id * hs;
        let rows = nl::ndarray([t, hs], output.dtype(), buffer = nl::sbuf);
        for c in 0..h1s {
            let tp = nl::ndarray([t, H0], out.dtype(), buffer = nl::psum);
            nisa::nc_transpose(tp, out[s![.., c, ..]]);
            nisa::tensor_copy(rows.ap([[hs, t], [h1s, H0]], offset = c), tp);
        }
        nisa::dma_copy(output[s![.., c_shard..c_shard + hs]], rows);
    }

    /// A `STATIC` projection's dequantization scale for `p` partitions,
    /// `[p, 1]` (rows `0..p` of the scale, each partition its own row),
    /// loaded once per projection for [`evict_dequantized`]; `None` for
    /// `ROW` or unquantized weights.
    #[nki_helper]
    pub fn load_static_scale(op: ProjectionWeights, p: i64) -> Option<Sbuf> {
        let w_scale = op.w_scale;
        if let Some(scale) = w_scale {
            if !op.row {
                let scale_sb = nl::ndarray([p, 1], scale.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(scale_sb, scale[s![0..p, ..]]);
                return Some(scale_sb);
            }
        }
        None
    }

    /// `o` = a projection's fp32 sums `acc` times its fp8 dequantization
    /// scales, rounded to `o`'s dtype; `o = acc` for unquantized weights.
    /// `STATIC`: `static_scale` (from [`load_static_scale`]), one scale per
    /// partition of `o`. `ROW`: the scales `[128, columns]` read element for
    /// element as `o` `[P, C·copies]` with the access pattern `[[step, P],
    /// [1, C], [0, copies]]` from column `col0`, where the arrangements
    /// differ: tokens on the partitions read row `t` for token `t` (`step`
    /// the scales' width, one copy); columns on the partitions read row 0
    /// (`step` the columns between partitions), each column copied along
    /// the `copies` tokens.
    #[nki_helper]
    pub fn evict_dequantized(o: Sbuf, acc: Tensor, op: ProjectionWeights, static_scale: Option<Sbuf>, col0: i64, step: i64, copies: i64) {
        let w_scale = op.w_scale;
        let [p, free] = o.shape();
        if let Some(scale_sb) = static_scale {
            nisa::tensor_scalar(o, acc, nl::multiply, scale_sb[s![0..p, ..]]);
        } else if let Some(scale) = w_scale {
            let scale_sb = nl::ndarray([p, free], scale.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(scale_sb, scale.ap([[step, p], [1, free / copies], [0, copies]], offset = col0));
            nisa::tensor_tensor(o, acc, scale_sb, nl::multiply);
        } else {
            nisa::tensor_copy(o, acc);
        }
    }
}
