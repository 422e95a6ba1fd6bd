//! The NKI library's `mlp` kernel: `down(act(gate(x)) · up(x))` of
//! (optionally residual-added and normalised) hidden rows. Like the library it
//! dispatches on the token count: `B·S <= TKG_BS_SEQLEN_THRESHOLD` (and
//! `force_cte_mode` off) runs the decode-phase (token generation) path,
//! [`mlp_tkg`], the library's `mlp_tkg/` folder; its context-encoding path
//! (`mlp_cte/`) is not implemented, and larger calls are refused.
//!
//! With `T = B·S` tokens (at most 96: they fit on the partitions), `H` hidden
//! and `I` intermediate columns, and `n` programs in the launch (LNC), program
//! `k` holds hidden shard `k` (`H/n` columns) of the normalised rows in the
//! `[128, T, H1s]` layout of `rmsnorm_tkg` (`H1s = H/128/n`; element `h` of
//! the shard at partition `h / H1s`, column `h % H1s`):
//!
//! ```text
//! (fused add)   x = hidden + fused_add            [T, H], in hidden's dtype
//!               (store_fused_add_result) stored[:, shard k] = x
//! (norm)        x = norm(x) in the layout, into a private HBM scratch
//! x_sb = shard k of x                              [128, T, H1s]
//! for each I tile of up to 128 columns:           (process_gate_up_projection)
//!     gate[:, i, :] = Σ_c W_gate[shard rows at column c, I tile]ᵀ @ x_sb[:, :, c]   # PSUM, fp32
//!     up[:, i, :]   = the same with W_up
//! (n = 2) gate, up += the other program's partial sums   # sendrecv
//! gate += gate bias; up += up bias                 # fp32, per partition
//! gate = act(clamp(gate)); up = clamp(up)
//! gu = gate · up   (skip_gate_proj: act(clamp(up)))  [128, I/128, T], hidden's dtype
//! for each 512-column chunk of the shard's H/n output columns:   (process_down_projection)
//!     out[T, chunk] = Σ_i gu[:, i, :]ᵀ @ W_down[I tile, chunk]   # PSUM, fp32
//! out (+ down bias) -> output[:, shard k]          # hidden's dtype, then output_dtype
//! ```
//!
//! The intermediates of the projections are fp32, as in the library; the
//! product `gu` and the output are rounded to the hidden dtype. The library's
//! two matmul arrangements (`use_tkg_gate_up_proj_column_tiling`,
//! `use_tkg_down_proj_column_tiling`: the hidden rows or the weights as the
//! stationary operand) compute the same sums in the same precision; this port
//! implements one, the weights stationary for gate/up (the product lands with
//! `I` on the partitions, as the down projection contracts it) and `gu`
//! stationary for the down projection (the output lands as `[T, H]` rows),
//! and takes both flags without changing the result.
//!
//! The kernel takes the library's signature, parameter names, order and
//! defaults (`activation_fn` a member of the library's [`ActFnType`],
//! `normalization_type` of [`NormType`], `quantization_type` of
//! [`QuantizationType`]), except the trailing `sbm` (the library's SBUF
//! allocator; tiles are placed by the compiler here). It allocates the output
//! `[B, S, H]` (in `output_dtype`, hidden's dtype by default) and, with a
//! stored residual add, the sum, and returns them (a tuple where the library
//! returns a list). Implemented: `NO_NORM`, `RMS_NORM`, `RMS_NORM_SKIP_GAMMA`,
//! `LAYER_NORM` (with or without bias), the four activations, `skip_gate_proj`, the three projection
//! biases, the four clamps, the fused residual add (stored or not), 2-D `[T,
//! H]` or 3-D hidden in HBM, the down weights in the
//! `use_tkg_down_proj_optimized_layout` layout, one program or an LNC2
//! launch. Refused with a message naming the option: more than 96 tokens or
//! `force_cte_mode`, quantized weights (`QuantizationType` other than
//! `NONE`) and `store_output_in_sbuf`. The rules are
//! [`mlp_violation`](crate::mlp::mlp_parameters::mlp_violation).
//!
//! The enums, bundles and helpers live in this one module, `NormType` and
//! `QuantizationType` declared again beside `rmsnorm_quant`'s (same names and
//! values): the macro shares helpers across modules, not enums or bundles.

use nki::prelude::*;

pub use kernel::*;

/// The kernel, its enums, bundles, tile constants and phase helpers.
#[nki_module]
pub mod kernel {
    use crate::subkernels::layernorm_tkg::{layernorm_tkg_shard_on_bxs, layernorm_tkg_shard_on_h};
    use crate::subkernels::norm_tkg_utils::load_input_to_sbuf;
    use crate::subkernels::rmsnorm_tkg::{rmsnorm_tkg_shard_on_bxs, rmsnorm_tkg_shard_on_h};
    pub use crate::utils::common_types::{ActFnType, NormType, QuantizationType};
    use nki::prelude::*;

    /// Partitions: the hidden and intermediate dims are tiled by them.
    pub const H0: i64 = 128;
    /// Token counts up to this run the token-generation path.
    pub const TKG_BS_SEQLEN_THRESHOLD: i64 = 96;

    /// The tensors of an `mlp` call, as the phases read them (the library
    /// keeps them in its `MLPParameters` and its bias and norm bundles).
    #[nki_object]
    pub struct MLPTensors {
        /// Gate projection weights `[H, I]`.
        pub gate_proj_weights_tensor: Tensor,
        /// Up projection weights `[H, I]`.
        pub up_proj_weights_tensor: Tensor,
        /// Down projection weights `[I, H]`.
        pub down_proj_weights_tensor: Tensor,
        /// Gamma `[1, H]` of the norm.
        pub normalization_weights_tensor: Option<Tensor>,
        /// Beta `[1, H]` of a LayerNorm.
        pub normalization_bias_tensor: Option<Tensor>,
        /// Gate projection bias `[1, I]`.
        pub gate_proj_bias_tensor: Option<Tensor>,
        /// Up projection bias `[1, I]`.
        pub up_proj_bias_tensor: Option<Tensor>,
        /// Down projection bias `[1, H]`.
        pub down_proj_bias_tensor: Option<Tensor>,
        /// The residual added to the hidden rows first.
        pub fused_add_tensor: Option<Tensor>,
    }

    /// The scalar options the gate/up phase reads (the library keeps them in
    /// its `MLPParameters`).
    #[nki_object]
    pub struct MLPActivationParameters {
        /// The activation of the gate (or of the up projection with `skip_gate_proj`).
        pub activation_fn: ActFnType,
        /// Only the up projection, activated, feeds the down projection.
        pub skip_gate_proj: bool,
        /// Upper clamp of the gate projection, before its activation.
        pub gate_clamp_upper_limit: Option<f64>,
        /// Lower clamp of the gate projection.
        pub gate_clamp_lower_limit: Option<f64>,
        /// Upper clamp of the up projection.
        pub up_clamp_upper_limit: Option<f64>,
        /// Lower clamp of the up projection.
        pub up_clamp_lower_limit: Option<f64>,
    }

    /// Output columns per down-projection chunk: one fp32 PSUM bank.
    pub const PSUM_FMAX: i64 = 512;
    /// The dtype of the projections' sums and of the activation.
    pub const INTER_DTYPE: Dtype = nl::float32;
    /// The DMA queue the two programs exchange partial sums over.
    pub const PIPE_ID: i64 = 0;

    /// The library's `MLPTKGConstants` dimensions: sizes, and the hidden shard
    /// of this program.
    #[nki_object]
    pub struct MLPTKGConstants {
        /// Tokens, `B · S`.
        pub t: i64,
        /// Hidden size `H`.
        pub h: i64,
        /// Intermediate size `I`.
        pub i: i64,
        /// `H / 128`.
        pub h1: i64,
        /// Programs of the launch, each holding one hidden shard.
        pub num_shards: i64,
        /// This program's shard.
        pub shard_id: i64,
        /// Hidden columns of a shard, `H / num_shards`.
        pub h_per_shard: i64,
        /// Layout columns of a shard, `H1 / num_shards`.
        pub h1_shard: i64,
        /// 128-row tiles of `I` (the last may be partial).
        pub i_tiles: i64,
    }

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
    /// (the layout of `n` hidden shards) with the norm kernels' helpers: one
    /// program normalises every shard; two split the hidden dim
    /// (`shard_on_h`), each writing its own shard, the partial sums exchanged.
    #[nki_helper]
    pub fn normalize_rows(hidden: Hbm, gamma: Hbm, beta: Option<Hbm>, normed: Hbm, layer: bool, eps: f64, dims: MLPTKGConstants) {
        let n = dims.num_shards;
        if layer && n > 1 {
            layernorm_tkg_shard_on_h(hidden, gamma, beta, normed, eps);
        } else if layer {
            layernorm_tkg_shard_on_bxs(hidden, gamma, beta, normed, eps);
        } else if n > 1 {
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

    /// `dst[:, i, :]` `[128, I/128, T]` (fp32) = the program's partial
    /// projection `W[shard rows, :]ᵀ @ x` of each 128-column tile `i` of `w`
    /// `[H, I]`: the weight tile `[128, H1s, 128]` stationary, `x_sb`'s
    /// columns moving, summed over the layout columns in PSUM.
    #[nki_helper]
    pub fn gate_up_projection_lhs_rhs_swap(x_sb: Sbuf, w: Hbm, dst: Sbuf, dims: MLPTKGConstants) {
        let (t, i, h1s) = (dims.t, dims.i, dims.h1_shard);
        let row0 = dims.shard_id * dims.h_per_shard;
        for it in nl::affine_range(dims.i_tiles) {
            let i0 = it * H0;
            let isz = (i - i0).min(H0);
            let w_sb = nl::ndarray([H0, h1s, H0], w.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(w_sb[s![.., .., 0..isz]], w.ap([[h1s * i, H0], [i, h1s], [1, isz]], offset = row0 * i + i0));
            let acc = nl::ndarray([H0, t], INTER_DTYPE, buffer = nl::psum);
            for c in nl::sequential_range(h1s) {
                nisa::nc_matmul(acc[s![0..isz, ..]], w_sb[s![.., c, 0..isz]], x_sb[s![.., .., c]]);
            }
            nisa::tensor_copy(dst[s![0..isz, it, ..]], acc[s![0..isz, ..]]);
        }
    }

    /// Adds the other program's partial sums of `p` (two programs), then the
    /// bias `[1, I]` (one value per partition of each tile), in fp32.
    #[nki_helper]
    pub fn finish_projection(p: Sbuf, bias: Option<Hbm>, dims: MLPTKGConstants) {
        if dims.num_shards > 1 {
            let other = 1 - dims.shard_id;
            let remote = nl::ndarray([H0, dims.i_tiles, dims.t], INTER_DTYPE, buffer = nl::sbuf);
            nisa::sendrecv(p, remote, other, other, PIPE_ID);
            nisa::tensor_tensor(p, p, remote, nl::add);
        }
        if let Some(b) = bias {
            for it in nl::affine_range(dims.i_tiles) {
                let i0 = it * H0;
                let isz = (dims.i - i0).min(H0);
                let b_sb = nl::ndarray([H0, 1], b.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(b_sb[s![0..isz, ..]], b.ap([[1, isz], [1, 1]], offset = i0));
                nisa::tensor_scalar(p[s![0..isz, it, ..]], p[s![0..isz, it, ..]], nl::add, b_sb[s![0..isz, ..]]);
            }
        }
    }

    /// Clamps `p` in place to `[lower, upper]` (each bound optional).
    #[nki_helper]
    pub fn clamp(p: Sbuf, upper: Option<f64>, lower: Option<f64>) {
        if let Some(u) = upper {
            nisa::tensor_scalar(p, p, nl::minimum, u);
        }
        if let Some(l) = lower {
            nisa::tensor_scalar(p, p, nl::maximum, l);
        }
    }

    /// `p = act(p)` in place for the library's activation enum.
    #[nki_helper]
    pub fn apply_activation(p: Sbuf, activation_fn: ActFnType) {
        match activation_fn {
            ActFnType::SiLU => nisa::activation(p, nl::silu, p),
            ActFnType::GELU => nisa::activation(p, nl::gelu, p),
            ActFnType::GELU_Tanh_Approx => nisa::activation(p, nl::gelu_apprx_tanh, p),
            ActFnType::Swish => nisa::activation(p, nl::gelu_apprx_sigmoid, p),
        }
    }

    /// The gate and up projections of `x_sb`, their gated activation, into
    /// `gu` `[128, I/128, T]` (hidden's dtype): `act(clamp(gate)) · clamp(up)`,
    /// or `act(clamp(up))` with `skip_gate_proj`.
    #[nki_helper]
    pub fn process_gate_up_projection(
        x_sb: Sbuf,
        gate_w: Hbm,
        up_w: Hbm,
        gate_b: Option<Hbm>,
        up_b: Option<Hbm>,
        gu: Sbuf,
        act: MLPActivationParameters,
        dims: MLPTKGConstants,
    ) {
        let shape = [H0, dims.i_tiles, dims.t];
        // Zeroed so the rows past I in the last tile hold no stale values.
        let up = nl::ndarray(shape, INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(up, 0.0);
        gate_up_projection_lhs_rhs_swap(x_sb, up_w, up, dims);
        finish_projection(up, up_b, dims);
        clamp(up, act.up_clamp_upper_limit, act.up_clamp_lower_limit);
        if act.skip_gate_proj {
            apply_activation(up, act.activation_fn);
            nisa::tensor_copy(gu, up);
        } else {
            let gate = nl::ndarray(shape, INTER_DTYPE, buffer = nl::sbuf);
            nisa::memset(gate, 0.0);
            gate_up_projection_lhs_rhs_swap(x_sb, gate_w, gate, dims);
            finish_projection(gate, gate_b, dims);
            clamp(gate, act.gate_clamp_upper_limit, act.gate_clamp_lower_limit);
            apply_activation(gate, act.activation_fn);
            nisa::tensor_tensor(gu, gate, up, nl::multiply);
        }
    }

    /// The down projection of `gu` onto this program's hidden shard of
    /// `output` `[T, H]`: per chunk of up to 512 columns, `Σ_i gu[:, i, :]ᵀ @
    /// W_down[I tile, chunk]` in PSUM, rounded to hidden's dtype, plus the bias
    /// (in that dtype, as the library adds it), then cast to the output's
    /// dtype. With `optimized_layout` the weight is stored `[I, n, H1s, 128]`
    /// (logical column `k·H/n + p·H1s + c` at `k·H/n + c·128 + p`): a chunk
    /// is whole runs of `H1s` columns, gathered by a 3-level access pattern.
    #[nki_helper]
    pub fn process_down_projection(gu: Sbuf, down_w: Hbm, down_b: Option<Hbm>, output: Hbm, optimized_layout: bool, dims: MLPTKGConstants) {
        let (t, i, h, h2) = (dims.t, dims.i, dims.h, dims.h1_shard);
        let c_shard = dims.shard_id * dims.h_per_shard;
        let chunk = if optimized_layout { PSUM_FMAX / h2 * h2 } else { PSUM_FMAX };
        for ch in nl::affine_range(dims.h_per_shard.div_ceil(chunk)) {
            let c0 = c_shard + ch * chunk;
            let cols = (c_shard + dims.h_per_shard - c0).min(chunk);
            let acc = nl::ndarray([t, PSUM_FMAX], INTER_DTYPE, buffer = nl::psum);
            for it in nl::sequential_range(dims.i_tiles) {
                let i0 = it * H0;
                let isz = (i - i0).min(H0);
                let w_sb = nl::ndarray([H0, PSUM_FMAX], down_w.dtype(), buffer = nl::sbuf);
                if optimized_layout {
                    let (p0, runs) = (ch * chunk / h2, cols / h2);
                    nisa::dma_copy(
                        w_sb.ap([[PSUM_FMAX, isz], [h2, runs], [1, h2]]),
                        down_w.ap([[h, isz], [1, runs], [H0, h2]], offset = i0 * h + c_shard + p0),
                    );
                } else {
                    nisa::dma_copy(w_sb[s![0..isz, 0..cols]], down_w.ap([[h, isz], [1, cols]], offset = i0 * h + c0));
                }
                nisa::nc_matmul(acc[s![.., 0..cols]], gu[s![0..isz, it, ..]], w_sb[s![0..isz, 0..cols]]);
            }
            let o = nl::ndarray([t, PSUM_FMAX], gu.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(o[s![.., 0..cols]], acc[s![.., 0..cols]]);
            if let Some(b) = down_b {
                let b_sb = nl::ndarray([t, PSUM_FMAX], b.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(b_sb[s![.., 0..cols]], b[s![.., c0..c0 + cols]].broadcast(0, t));
                nisa::tensor_tensor(o[s![.., 0..cols]], o[s![.., 0..cols]], b_sb[s![.., 0..cols]], nl::add);
            }
            let cast = nl::ndarray([t, PSUM_FMAX], output.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(cast[s![.., 0..cols]], o[s![.., 0..cols]]);
            nisa::dma_copy(output[s![.., c0..c0 + cols]], cast[s![.., 0..cols]]);
        }
    }

    /// The decode-phase MLP of `hidden` `[T, H]` into `output` `[T, H]` (and,
    /// when given, the residual sum into `stored`): the phases of the module
    /// docs in order.
    #[nki_helper]
    pub fn mlp_tkg(
        hidden: Hbm,
        w: MLPTensors,
        output: Hbm,
        stored: Option<Hbm>,
        normalization_type: NormType,
        eps: f64,
        act: MLPActivationParameters,
        optimized_layout: bool,
    ) {
        let [t, h] = hidden.shape();
        let i = w.down_proj_weights_tensor.shape()[0];
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shard_id = if n > 1 { nl::program_id(0) } else { 0 };
        let dims = MLPTKGConstants {
            t,
            h,
            i,
            h1: h / H0,
            num_shards: n,
            shard_id,
            h_per_shard: h / n,
            h1_shard: h / H0 / n,
            i_tiles: i.div_ceil(H0),
        };
        let mut x = hidden;
        let fused = w.fused_add_tensor;
        if let Some(residual) = fused {
            let sum = nl::ndarray([t, h], hidden.dtype(), buffer = nl::private_hbm);
            input_fused_add(hidden, residual, sum, stored, dims);
            x = sum;
        }
        let x_sb = nl::ndarray([H0, t, dims.h1_shard], hidden.dtype(), buffer = nl::sbuf);
        input_norm_load(x, x_sb, normalization_type, w.normalization_weights_tensor, w.normalization_bias_tensor, eps, dims);
        let gu = nl::ndarray([H0, dims.i_tiles, t], hidden.dtype(), buffer = nl::sbuf);
        process_gate_up_projection(
            x_sb,
            w.gate_proj_weights_tensor,
            w.up_proj_weights_tensor,
            w.gate_proj_bias_tensor,
            w.up_proj_bias_tensor,
            gu,
            act,
            dims,
        );
        process_down_projection(gu, w.down_proj_weights_tensor, w.down_proj_bias_tensor, output, optimized_layout, dims);
    }

    /// Asserts that an optional `[1, n]` tensor has that shape.
    #[nki_helper]
    pub fn check_row(t: Option<Hbm>, name: &str, n: i64) {
        if let Some(v) = t {
            let shape = v.shape();
            assert!(v.ndim() == 2 && shape[0] == 1 && shape[1] == n, "mlp: {name} must be [1, {n}], got {shape}");
        }
    }

    /// The MLP of `hidden_tensor` `[B, S, H]` (or `[T, H]`) with gate and up
    /// weights `[H, I]` and down weights `[I, H]`; returns the output `[B, S,
    /// H]`, and the residual sum when `store_fused_add_result` is set.
    #[nki_kernel]
    pub fn mlp(
        #[dtypes(float32, bfloat16, float16)] hidden_tensor: Hbm,
        #[dtypes(float32, bfloat16, float16)] gate_proj_weights_tensor: Hbm,
        #[dtypes(float32, bfloat16, float16)] up_proj_weights_tensor: Hbm,
        #[dtypes(float32, bfloat16, float16)] down_proj_weights_tensor: Hbm,
        #[dtypes(float32, bfloat16, float16)] normalization_weights_tensor: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] gate_proj_bias_tensor: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] up_proj_bias_tensor: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] down_proj_bias_tensor: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] normalization_bias_tensor: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] fused_add_tensor: Option<Hbm>,
        #[default(false)] store_fused_add_result: bool,
        #[default(ActFnType::SiLU)] activation_fn: ActFnType,
        #[default(NormType::NO_NORM)] normalization_type: NormType,
        #[default(QuantizationType::NONE)] quantization_type: QuantizationType,
        gate_w_scale: Option<Hbm>,
        up_w_scale: Option<Hbm>,
        down_w_scale: Option<Hbm>,
        gate_up_in_scale: Option<Hbm>,
        down_in_scale: Option<Hbm>,
        #[default(0.0)] quant_clipping_bound: f64,
        output_dtype: Option<Dtype>,
        #[default(false)] store_output_in_sbuf: bool,
        #[default(1e-6)] eps: f64,
        #[default(false)] skip_gate_proj: bool,
        #[default(true)] use_tkg_gate_up_proj_column_tiling: bool,
        #[default(true)] use_tkg_down_proj_column_tiling: bool,
        #[default(false)] use_tkg_down_proj_optimized_layout: bool,
        gate_clamp_upper_limit: Option<f64>,
        gate_clamp_lower_limit: Option<f64>,
        up_clamp_upper_limit: Option<f64>,
        up_clamp_lower_limit: Option<f64>,
        #[default(false)] force_cte_mode: bool,
    ) -> Outputs {
        // Both arrangements of the projections compute the same sums (module
        // docs); the quantization inputs belong to the refused quantized paths.
        let _ = use_tkg_gate_up_proj_column_tiling;
        let _ = quant_clipping_bound;
        let _ = gate_w_scale;
        let _ = up_w_scale;
        let _ = down_w_scale;
        let _ = gate_up_in_scale;
        let _ = down_in_scale;
        let rank = hidden_tensor.ndim();
        assert!(rank == 2 || rank == 3, "mlp: hidden_tensor must be [B, S, H] or [T, H], got {rank} dims");
        let hs = hidden_tensor.shape();
        let (b, sl) = if rank == 3 { (hs[0], hs[1]) } else { (1, hs[0]) };
        let h = hs[rank - 1];
        let t = b * sl;
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        // The rules of `mlp_violation`, checked when the kernel is traced.
        assert!(h > 0 && h % H0 == 0, "mlp: H = {h} must be a positive multiple of 128");
        let gs = gate_proj_weights_tensor.shape();
        assert!(gate_proj_weights_tensor.ndim() == 2 && gs[0] == h, "mlp: gate_proj_weights_tensor must be [H, I] with H = {h}, got {gs}");
        let i = gs[1];
        assert!(t > 0 && i > 0, "mlp: B * S = {t} and I = {i} must be positive");
        let us = up_proj_weights_tensor.shape();
        assert!(up_proj_weights_tensor.ndim() == 2 && us[0] == h && us[1] == i, "mlp: up_proj_weights_tensor must be [{h}, {i}], got {us}");
        let ds = down_proj_weights_tensor.shape();
        assert!(
            down_proj_weights_tensor.ndim() == 2 && ds[0] == i && ds[1] == h,
            "mlp: down_proj_weights_tensor must be [{i}, {h}], got {ds}"
        );
        check_row(gate_proj_bias_tensor, "gate_proj_bias_tensor", i);
        check_row(up_proj_bias_tensor, "up_proj_bias_tensor", i);
        check_row(down_proj_bias_tensor, "down_proj_bias_tensor", h);
        let has_norm = normalization_type != NormType::NO_NORM;
        assert!(
            !has_norm || normalization_bias_tensor.is_none() || normalization_type == NormType::LAYER_NORM,
            "mlp: normalization_bias_tensor is only supported with NormType.LAYER_NORM"
        );
        assert!(
            !use_tkg_down_proj_optimized_layout || !use_tkg_down_proj_column_tiling,
            "mlp: use_tkg_down_proj_optimized_layout needs use_tkg_down_proj_column_tiling=False"
        );
        assert!(
            t <= TKG_BS_SEQLEN_THRESHOLD && !force_cte_mode,
            "mlp: B * S = {t} must be at most TKG_BS_SEQLEN_THRESHOLD = 96 and force_cte_mode off (the context-encoding path is not implemented)"
        );
        assert!(
            quantization_type == QuantizationType::NONE,
            "mlp: quantization_type must be QuantizationType.NONE (the member implemented), got {quantization_type}"
        );
        assert!(!store_output_in_sbuf, "mlp: store_output_in_sbuf is not implemented (the output is an HBM tensor)");
        assert!((h / H0) % programs == 0, "mlp: H / 128 = {} must split evenly over the {programs} programs of the launch", h / H0);
        assert!(
            !use_tkg_down_proj_optimized_layout || h / H0 / programs <= PSUM_FMAX,
            "mlp: use_tkg_down_proj_optimized_layout needs H / 128 / programs <= 512, got {}",
            h / H0 / programs
        );
        if has_norm {
            assert!(
                normalization_type == NormType::RMS_NORM_SKIP_GAMMA || normalization_weights_tensor.is_some(),
                "mlp: normalization_type {normalization_type} needs normalization_weights_tensor"
            );
            check_row(normalization_weights_tensor, "normalization_weights_tensor", h);
            check_row(normalization_bias_tensor, "normalization_bias_tensor", h);
        }
        if let Some(r) = fused_add_tensor {
            assert!(r.shape() == hs, "mlp: fused_add_tensor must have hidden_tensor's shape {hs}, got {}", r.shape());
        }

        let out_dtype = output_dtype.unwrap_or(hidden_tensor.dtype());
        let out = nl::ndarray([b, sl, h], out_dtype, buffer = nl::shared_hbm);
        let store = store_fused_add_result && fused_add_tensor.is_some();
        let stored = nl::ndarray([b, sl, h], out_dtype, buffer = nl::shared_hbm);
        let w = MLPTensors {
            gate_proj_weights_tensor,
            up_proj_weights_tensor,
            down_proj_weights_tensor,
            normalization_weights_tensor: if has_norm { normalization_weights_tensor } else { None },
            normalization_bias_tensor: if has_norm { normalization_bias_tensor } else { None },
            gate_proj_bias_tensor,
            up_proj_bias_tensor,
            down_proj_bias_tensor,
            fused_add_tensor,
        };
        let act = MLPActivationParameters {
            activation_fn,
            skip_gate_proj,
            gate_clamp_upper_limit,
            gate_clamp_lower_limit,
            up_clamp_upper_limit,
            up_clamp_lower_limit,
        };
        let stored_2d = if store { Some(stored.reshape([t, h])) } else { None };
        mlp_tkg(
            hidden_tensor.reshape([t, h]),
            w,
            out.reshape([t, h]),
            stored_2d,
            normalization_type,
            eps,
            act,
            use_tkg_down_proj_optimized_layout,
        );
        if store {
            return Outputs(out, stored);
        }
        Outputs(out)
    }
}
