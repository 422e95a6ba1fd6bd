//! Backward of the blockwise MoE matmul: the library's `blockwise_mm_bwd`
//! (dropless, sharded on the hidden dim), the gradients of the layer whose
//! forward is [`bwmm_shard_on_block`](crate::moe::moe_cte::bwmm_shard_on_block).
//!
//! The forward saved, per block `n` of `B` positions, the clamped gate and up
//! projections transposed, `gate_up_proj_act_checkpoint_T[n] = [g; u]`
//! `[2, I, B]`, and the down projection `down_proj_act_checkpoint[n] = y`
//! `[B, H]`. With `dy` the gradient of the output, for each block, its expert
//! `e` and its tokens `tok` (padding positions as in the forward):
//!
//! ```text
//! a = aff[tok·E + e]                               # [B], gathered by row
//! daff[tok·E + e] = Σ_h dy[tok] · y                # the affinity gradient
//! dz = a · dy[tok]                                 # [B, H], tokens on partitions
//! inter = act(g) · u                               # [I, B]
//! dW_down[e] += interᵀ·dz ; db_down[e] += Σ_b dz
//! di = W_down[e]·dzᵀ                               # [I, B], contraction over H
//! dg = di · u · act'(g) · [lo < g < hi]            # the clamp passes where inside
//! du = di · act(g) · [lo < u < hi]
//! dW_gu[e, :, 0/1] += x[tok]ᵀ·dg/duᵀ ; db_gu[e] += Σ_b [dg; du]
//! dx[tok] (+)= dgᵀ·W_gu[e, :, 0]ᵀ + duᵀ·W_gu[e, :, 1]ᵀ
//! ```
//!
//! Sharding: program `s` of `P` owns the hidden columns `s·H/P ..
//! (s+1)·H/P` of every gradient with a hidden dim (`dx`, `dW_gu`, `dW_down`,
//! `db_down`) and zeroes, reads and writes only those, so the programs never
//! share a row. The contraction over the full hidden dim (`di`, and with it
//! `dg`/`du`) and the affinity gradient are computed by every program; the
//! first program alone writes `daff` and `db_gu`. The library instead splits
//! the block's token tiles (and `I`) between the programs and exchanges the
//! intermediate gradients through shared HBM with core barriers; the
//! arithmetic per element is the same contraction.
//!
//! Tiling: tokens on the 128 partitions for the gathers, `dz`, and the weight
//! gradients' contractions over the block; the hidden dim on the partitions
//! (128-row tiles, the last partial) for `di`; the intermediate dim on the
//! partitions (128-row tiles, the last partial) for the activation gradients
//! and `dx`; 512 free columns per PSUM bank. Gradients accumulate across
//! blocks of one expert (and across a token's blocks under
//! `is_tensor_update_accumulating`) by reading, adding and writing HBM.
//!
//! Options this port does not implement are refused by name (see
//! [`BwmmBwdRule`]): the shard options other than `SHARD_ON_HIDDEN` / `AUTO`,
//! `AFFINITY_ON_I`, `DROPPING`, `block_tile_size`, and the GELU activations
//! (the library accepts all of these and runs its shard-on-hidden, affinity-
//! on-hidden, dropless SiLU path regardless).

// The library's parameter `gate_up_proj_act_checkpoint_T` keeps its spelling.
#![allow(non_snake_case)]

pub use kernel::*;

use crate::moe::moe_cte::moe_cte_utils::{silu_gate, whole_blocks};

/// The kernel and its phases.
#[nki::nki_module(export = blockwise_mm_backward)]
pub mod kernel {
    use crate::moe::moe_cte::bwmm_shard_on_block::{compute_intermediate_states, dimension_sizes, load_as, load_block_tokens};
    pub use crate::moe::moe_cte::moe_cte_utils::SkipMode;
    use crate::moe::moe_cte::moe_cte_utils::{
        Configs, GUP_PROJ_DIM, InputTensors, PSUM_SIZE, TILE_SIZE, calculate_expert_affinities, expert_affinity_rows, gather_token_rows,
        scatter_token_rows,
    };
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::{apply_activation, check_2d, check_3d};
    use nki::prelude::*;

    /// The DMA-transpose granule the library's sharded hidden and
    /// intermediate sizes are multiples of.
    pub const DMA_TRANSPOSE_ALIGN: i64 = 32;
    /// The most programs the hidden dim is sharded over (LNC2).
    pub const MAX_SHARDS: i64 = 2;

    /// How the work is split between the programs.
    #[nki_enum]
    pub enum ShardOption {
        /// The library's choice, which is `SHARD_ON_HIDDEN`.
        AUTO,
        /// The hidden dim split between the programs.
        SHARD_ON_HIDDEN,
        /// The intermediate dim split between the programs.
        SHARD_ON_INTERMEDIATE,
        /// One program.
        BASELINE_LNC1,
    }

    /// Where the affinity scales the expert.
    #[nki_enum]
    pub enum AffinityOption {
        /// On the down projection's output (hidden dim).
        AFFINITY_ON_H,
        /// On the intermediate.
        AFFINITY_ON_I,
    }

    /// How tokens past an expert's capacity are treated.
    #[nki_enum]
    pub enum KernelTypeOption {
        /// One block per expert, tokens past it dropped.
        DROPPING,
        /// Any number of blocks per expert.
        DROPLESS,
    }

    /// The forward's optional clamps (the library's `ClampLimits`): the
    /// "linear" pair clamps the up projection, the "non-linear" pair the gate.
    #[nki_object]
    pub struct ClampLimits {
        /// `u`'s ceiling: its gradient passes only strictly below it.
        #[default(None)]
        pub linear_clamp_upper_limit: Option<f64>,
        /// `u`'s floor: its gradient passes only strictly above it.
        #[default(None)]
        pub linear_clamp_lower_limit: Option<f64>,
        /// `g`'s ceiling, as `u`'s.
        #[default(None)]
        pub non_linear_clamp_upper_limit: Option<f64>,
        /// `g`'s floor, as `u`'s.
        #[default(None)]
        pub non_linear_clamp_lower_limit: Option<f64>,
    }

    /// The tensors the backward pass reads, in the kernel signature's order.
    #[nki_object]
    pub struct BwmmBwdInputs {
        /// Token rows `[T, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub hidden_states: Hbm,
        /// Affinities `[T·E, 1]`.
        #[dtypes(float32, bfloat16, float16)]
        pub expert_affinities_masked: Hbm,
        /// Fused gate/up weights `[E, H, 2, I]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gate_up_proj_weight: Hbm,
        /// Down weights `[E, I, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub down_proj_weight: Hbm,
        /// Saved gate/up projections `[N, 2, I, B]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gate_up_proj_act_checkpoint_T: Hbm,
        /// Saved down projections `[N, B, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub down_proj_act_checkpoint: Hbm,
        /// Token of each position `[N·B]`.
        #[dtypes(int32)]
        pub token_position_to_id: Hbm,
        /// Expert of each block `[N, 1]`.
        #[dtypes(int32)]
        pub block_to_expert: Hbm,
        /// Gradient of the output `[T, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub output_hidden_states_grad: Hbm,
    }

    /// The gradients the pass writes (the kernel's outputs).
    #[nki_object]
    pub struct BwdGradients {
        /// `[T, H]`.
        pub hidden_states_grad: Hbm,
        /// `[T·E, 1]`.
        pub expert_affinities_masked_grad: Hbm,
        /// `[E, H, 2, I]`.
        pub gate_up_proj_weight_grad: Hbm,
        /// `[E, I, H]`.
        pub down_proj_weight_grad: Hbm,
        /// `[E, 2, I]` (with `bias`).
        pub gate_and_up_proj_bias_grad: Option<Hbm>,
        /// `[E, H]` (with `bias`).
        pub down_proj_bias_grad: Option<Hbm>,
    }

    /// The gradient outputs, each shaped and typed as the input it is the
    /// gradient of; the bias gradients (with `bias`) in `compute_dtype`.
    #[nki_helper]
    pub fn allocate_gradient_outputs(inputs: BwmmBwdInputs, bias: bool, compute_dtype: Dtype) -> BwdGradients {
        let (hs, aff) = (inputs.hidden_states, inputs.expert_affinities_masked);
        let (gup, down) = (inputs.gate_up_proj_weight, inputs.down_proj_weight);
        let (t, h) = (hs.shape()[0], hs.shape()[1]);
        let (e, i_tp) = (down.shape()[0], down.shape()[1]);
        let mut gate_and_up_proj_bias_grad: Option<Hbm> = None;
        let mut down_proj_bias_grad: Option<Hbm> = None;
        if bias {
            gate_and_up_proj_bias_grad = Some(nl::ndarray([e, GUP_PROJ_DIM, i_tp], compute_dtype, buffer = nl::shared_hbm));
            down_proj_bias_grad = Some(nl::ndarray([e, h], compute_dtype, buffer = nl::shared_hbm));
        }
        BwdGradients {
            hidden_states_grad: nl::ndarray([t, h], hs.dtype(), buffer = nl::shared_hbm),
            expert_affinities_masked_grad: nl::ndarray([aff.shape()[0], 1], aff.dtype(), buffer = nl::shared_hbm),
            gate_up_proj_weight_grad: nl::ndarray([e, h, GUP_PROJ_DIM, i_tp], gup.dtype(), buffer = nl::shared_hbm),
            down_proj_weight_grad: nl::ndarray([e, i_tp, h], down.dtype(), buffer = nl::shared_hbm),
            gate_and_up_proj_bias_grad,
            down_proj_bias_grad,
        }
    }

    /// The tensors and options of a call (the library's `MOEBwdParameters`).
    #[nki_object]
    pub struct MOEBwdParameters {
        /// The tensors the pass reads.
        pub inputs: BwmmBwdInputs,
        /// The gradients it writes.
        pub grads: BwdGradients,
        /// Positions per block.
        pub block_size: i64,
        /// Which DMAs skip out-of-range rows.
        pub skip_dma: SkipMode,
        /// Dtype of the tiles the matmuls read.
        pub compute_dtype: Dtype,
        /// Whether a token's blocks add into its hidden gradient (top-k > 1).
        pub is_tensor_update_accumulating: bool,
        /// The forward's clamps.
        pub clamp_limits: ClampLimits,
        /// The gate's activation.
        pub activation_type: ActFnType,
    }

    /// The call's sizes and this program's hidden shard.
    #[nki_object]
    pub struct BwdDims {
        /// `B`.
        pub b: i64,
        /// `H`.
        pub h: i64,
        /// `E`.
        pub e: i64,
        /// `N`.
        pub n: i64,
        /// `I`.
        pub i_tp: i64,
        /// 128-token tiles per block.
        pub num_b_tiles: i64,
        /// 128-row tiles of `H`, the last partial.
        pub num_h_tiles: i64,
        /// 128-row tiles of `I`, the last partial.
        pub num_i_tiles: i64,
        /// Hidden columns of this program, `H / P`.
        pub h_shard: i64,
        /// This program's first hidden column.
        pub h_offset: i64,
        /// This program.
        pub shard_id: i64,
    }

    /// The sizes of `p` on program `shard_id` of `programs`.
    #[nki_helper]
    pub fn bwd_dims(p: MOEBwdParameters, programs: i64, shard_id: i64) -> BwdDims {
        let h = p.inputs.hidden_states.shape()[1];
        let (e, i_tp) = (p.inputs.down_proj_weight.shape()[0], p.inputs.down_proj_weight.shape()[1]);
        let b = p.block_size;
        let h_shard = h / programs;
        BwdDims {
            b,
            h,
            e,
            n: p.inputs.token_position_to_id.shape()[0] / b,
            i_tp,
            num_b_tiles: b / TILE_SIZE,
            num_h_tiles: h.div_ceil(TILE_SIZE),
            num_i_tiles: i_tp.div_ceil(TILE_SIZE),
            h_shard,
            h_offset: shard_id * h_shard,
            shard_id,
        }
    }

    /// Rows of 128-row tile `k` of a dim of `size`.
    #[nki_helper]
    pub fn tile_rows(size: i64, k: i64) -> i64 {
        TILE_SIZE.min(size - k * TILE_SIZE)
    }

    /// Zeroes `rows` rows from `r0` and columns `c0..c0 + cols` of `dst`
    /// `[R, C]`, 128 rows a DMA.
    #[nki_helper]
    pub fn zero_rows(dst: Hbm, r0: i64, rows: i64, c0: i64, cols: i64) {
        let zeros = nl::ndarray([TILE_SIZE, cols], dst.dtype(), buffer = nl::sbuf);
        nisa::memset(zeros, 0.0);
        for k in 0..rows.div_ceil(TILE_SIZE) {
            let a = r0 + k * TILE_SIZE;
            let n: i64 = tile_rows(rows, k);
            nisa::dma_copy(dst[s![a..a + n, c0..c0 + cols]], zeros[s![0..n, ..]]);
        }
    }

    /// Zeroes this program's part of every gradient (module docs).
    #[nki_helper]
    pub fn initialize_gradient_outputs_shard(p: MOEBwdParameters, d: BwdDims) {
        let (h, i, e, h0, hs) = (d.h, d.i_tp, d.e, d.h_offset, d.h_shard);
        let t = p.inputs.hidden_states.shape()[0];
        zero_rows(p.grads.hidden_states_grad, 0, t, h0, hs);
        let gu = p.grads.gate_up_proj_weight_grad.reshape([e * h, GUP_PROJ_DIM * i]);
        let dw = p.grads.down_proj_weight_grad.reshape([e * i, h]);
        for x in 0..e {
            zero_rows(gu, x * h + h0, hs, 0, GUP_PROJ_DIM * i);
        }
        zero_rows(dw, 0, e * i, h0, hs);
        let (down_bias, gate_up_bias) = (p.grads.down_proj_bias_grad, p.grads.gate_and_up_proj_bias_grad);
        if let Some(db) = down_bias {
            zero_rows(db, 0, e, h0, hs);
        }
        if d.shard_id == 0 {
            zero_rows(p.grads.expert_affinities_masked_grad, 0, t * e, 0, 1);
            if let Some(gb) = gate_up_bias {
                zero_rows(gb.reshape([e * GUP_PROJ_DIM, i]), 0, e * GUP_PROJ_DIM, 0, i);
            }
        }
    }

    /// `dst += delta` for an HBM region `dst` (`[rows, cols]`, an access
    /// pattern) and an on-chip `delta` of its shape: read, add, write back.
    #[nki_helper]
    pub fn accumulate_into(dst: Tensor, delta: Tensor) {
        let (rows, cols) = (delta.shape()[0], delta.shape()[1]);
        let acc = nl::ndarray([rows, cols], dst.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(acc, dst);
        nisa::tensor_tensor(acc, acc, delta, nl::add);
        nisa::dma_copy(dst, acc);
    }

    /// The block's token state the gradients read.
    #[nki_object]
    pub struct BlockTokens {
        /// Token ids `[128, B/128]` (position `128·j + p` at `[p, j]`).
        pub token_indices: Tensor,
        /// The expert `[1, 1]`.
        pub expert: Tensor,
        /// Token rows `[128, B/128, H]`, compute dtype.
        pub x: Tensor,
        /// `dz = a · dy[tok]`, `[128, B/128, H]`, compute dtype.
        pub dz: Tensor,
    }

    /// `dz` of the block and, on the first program, the affinity gradient
    /// `Σ_h dy · y` scattered to `token·E + e`.
    #[nki_helper]
    pub fn compute_down_projection_output_grad(p: MOEBwdParameters, d: BwdDims, block_idx: i64, tok: Sbuf, expert: Sbuf) -> Sbuf {
        let (dt, skip, h) = (p.compute_dtype, p.skip_dma.skip_token, d.h);
        let aff = calculate_expert_affinities(p.inputs.expert_affinities_masked, tok, expert, d.e, nl::float32, p.skip_dma);
        let rows = expert_affinity_rows(tok, expert, d.e, p.skip_dma);
        let dz = nl::ndarray([TILE_SIZE, d.num_b_tiles, h], dt, buffer = nl::sbuf);
        let dy = nl::ndarray([TILE_SIZE, h], dt, buffer = nl::sbuf);
        let y = nl::ndarray([TILE_SIZE, h], dt, buffer = nl::sbuf);
        let prod = nl::ndarray([TILE_SIZE, h], nl::float32, buffer = nl::sbuf);
        let sums = nl::ndarray([TILE_SIZE, 1], nl::float32, buffer = nl::sbuf);
        let daff = nl::ndarray([TILE_SIZE, 1], p.grads.expert_affinities_masked_grad.dtype(), buffer = nl::sbuf);
        for j in 0..d.num_b_tiles {
            if skip {
                nisa::memset(dy, 0.0);
            }
            gather_token_rows(dy, p.inputs.output_hidden_states_grad, tok[s![.., j..j + 1]], 0, skip);
            let t0 = j * TILE_SIZE;
            load_as(y, p.inputs.down_proj_act_checkpoint[s![block_idx, t0..t0 + TILE_SIZE, ..]], false);
            if d.shard_id == 0 {
                nisa::tensor_tensor(prod, dy, y, nl::multiply);
                nisa::tensor_reduce(sums, nl::add, prod, 1);
                nisa::tensor_copy(daff, sums);
                scatter_token_rows(p.grads.expert_affinities_masked_grad, daff, rows[s![.., j..j + 1]], 0, skip);
            }
            nisa::tensor_scalar(dz[s![.., j, ..]], dy, nl::multiply, aff[s![.., j..j + 1]]);
        }
        dz
    }

    /// `[128, H/128, B]` with `[p, c, b] = src[b % 128, b / 128, 128·c + p]`:
    /// the block's `[128, B/128, H]` rows with the hidden dim on the
    /// partitions (PE transposes, the last hidden tile partial).
    #[nki_helper]
    pub fn transpose_block_rows(src: Sbuf, d: BwdDims) -> Sbuf {
        let dst = nl::ndarray([TILE_SIZE, d.num_h_tiles, d.b], src.dtype(), buffer = nl::sbuf);
        for c in 0..d.num_h_tiles {
            let c0 = c * TILE_SIZE;
            let w: i64 = tile_rows(d.h, c);
            for j in 0..d.num_b_tiles {
                let ps = nl::ndarray([TILE_SIZE, TILE_SIZE], src.dtype(), buffer = nl::psum);
                nisa::nc_transpose(ps[s![0..w, ..]], src[s![.., j, c0..c0 + w]]);
                nisa::tensor_copy(dst[s![0..w, c, j * TILE_SIZE..(j + 1) * TILE_SIZE]], ps[s![0..w, ..]]);
            }
        }
        dst
    }

    /// `[128, B/128, I]` with `[p, j, i] = src[i % 128, i / 128, 128·j + p]`:
    /// an `[128, I/128, B]` intermediate-major block with the tokens on the
    /// partitions.
    #[nki_helper]
    pub fn transpose_to_tokens(src: Tensor, dst: Tensor, d: BwdDims) {
        for it in 0..d.num_i_tiles {
            let i0 = it * TILE_SIZE;
            let k: i64 = tile_rows(d.i_tp, it);
            for j in 0..d.num_b_tiles {
                let ps = nl::ndarray([TILE_SIZE, TILE_SIZE], src.dtype(), buffer = nl::psum);
                nisa::nc_transpose(ps[s![.., 0..k]], src[s![0..k, it, j * TILE_SIZE..(j + 1) * TILE_SIZE]]);
                nisa::tensor_copy(dst[s![.., j, i0..i0 + k]], ps[s![.., 0..k]]);
            }
        }
    }

    /// The saved gate and up projections of the block, `[128, 2, I/128, B]`
    /// float32 (`[p, g, it, b]` = projection `g` at intermediate row
    /// `128·it + p` of position `b`).
    #[nki_helper]
    pub fn _load_gate_up_projection_checkpoint(p: MOEBwdParameters, d: BwdDims, block_idx: i64) -> Sbuf {
        let gup = nl::ndarray([TILE_SIZE, GUP_PROJ_DIM, d.num_i_tiles, d.b], nl::float32, buffer = nl::sbuf);
        for g in 0..GUP_PROJ_DIM {
            for it in 0..d.num_i_tiles {
                let i0 = it * TILE_SIZE;
                let k: i64 = tile_rows(d.i_tp, it);
                load_as(gup[s![0..k, g, it, ..]], p.inputs.gate_up_proj_act_checkpoint_T[s![block_idx, g, i0..i0 + k, ..]], false);
            }
        }
        gup
    }

    /// `di = W_down[e]·dzᵀ`, `[128, I/128, B]` float32: the down weights
    /// loaded transposed (hidden dim on the partitions), a PSUM accumulation
    /// over the hidden tiles per intermediate tile and 512 positions.
    #[nki_helper]
    pub fn compute_intermediate_grad(p: MOEBwdParameters, d: BwdDims, dz_t: Sbuf, expert: Sbuf) -> Sbuf {
        let h: i64 = d.h;
        let i: i64 = d.i_tp;
        let w_t = nl::ndarray([TILE_SIZE, d.num_h_tiles, i], p.compute_dtype, buffer = nl::sbuf);
        for c in 0..d.num_h_tiles {
            let w: i64 = tile_rows(h, c);
            let src = p.inputs.down_proj_weight.ap([[1, w], [h, i]], offset = c * TILE_SIZE, scalar_offset = expert, indirect_dim = 0);
            load_as(w_t[s![0..w, c, ..]], src, p.skip_dma.skip_weight);
        }
        let fs = d.b.min(PSUM_SIZE);
        let di = nl::ndarray([TILE_SIZE, d.num_i_tiles, d.b], nl::float32, buffer = nl::sbuf);
        for it in 0..d.num_i_tiles {
            let i0 = it * TILE_SIZE;
            let k: i64 = tile_rows(i, it);
            for bt in 0..d.b / fs {
                let b0 = bt * fs;
                let ps = nl::ndarray([TILE_SIZE, fs], nl::float32, buffer = nl::psum);
                for c in 0..d.num_h_tiles {
                    let w: i64 = tile_rows(h, c);
                    nisa::nc_matmul(ps[s![0..k, ..]], w_t[s![0..w, c, i0..i0 + k]], dz_t[s![0..w, c, b0..b0 + fs]]);
                }
                nisa::tensor_copy(di[s![0..k, it, b0..b0 + fs]], ps[s![0..k, ..]]);
            }
        }
        di
    }

    /// `dst *= [lower < x < upper]` for the clamps given (the clamp's
    /// gradient: zero where the forward clamped).
    #[nki_helper]
    pub fn apply_clamp_mask(dst: Sbuf, x: Tensor, upper: Option<f64>, lower: Option<f64>) {
        let mask = nl::ndarray([dst.shape()[0], dst.shape()[1]], nl::float32, buffer = nl::sbuf);
        if let Some(u) = upper {
            nisa::tensor_scalar(mask, x, nl::less, u);
            nisa::tensor_tensor(dst, dst, mask, nl::multiply);
        }
        if let Some(l) = lower {
            nisa::tensor_scalar(mask, x, nl::greater, l);
            nisa::tensor_tensor(dst, dst, mask, nl::multiply);
        }
    }

    /// `dst = act'(data)`, the derivative of the gate's activation (SiLU or
    /// Swish; the rules refuse the others).
    #[nki_helper]
    pub fn apply_activation_grad(dst: Sbuf, data: Tensor, activation: ActFnType) {
        if activation == ActFnType::Swish {
            nisa::activation(dst, nl::gelu_apprx_sigmoid_dx, data);
        } else {
            nisa::activation(dst, nl::silu_dx, data);
        }
    }

    /// `[dg; du]`, `[128, 2, I/128, B]` in the compute dtype, from `di` and
    /// the saved projections `gup` (module docs).
    #[nki_helper]
    pub fn compute_gate_up_projection_output_grad(p: MOEBwdParameters, d: BwdDims, di: Sbuf, gup: Sbuf) -> Sbuf {
        let cl = p.clamp_limits;
        let dgu = nl::ndarray([TILE_SIZE, GUP_PROJ_DIM, d.num_i_tiles, d.b], p.compute_dtype, buffer = nl::sbuf);
        let act = nl::ndarray([TILE_SIZE, d.b], nl::float32, buffer = nl::sbuf);
        let grad = nl::ndarray([TILE_SIZE, d.b], nl::float32, buffer = nl::sbuf);
        for it in 0..d.num_i_tiles {
            let k: i64 = tile_rows(d.i_tp, it);
            let (g, u, dik) = (gup[s![0..k, 0, it, ..]], gup[s![0..k, 1, it, ..]], di[s![0..k, it, ..]]);
            let (a, r) = (act[s![0..k, ..]], grad[s![0..k, ..]]);
            apply_activation_grad(a, g, p.activation_type);
            nisa::tensor_tensor(r, dik, u, nl::multiply);
            nisa::tensor_tensor(r, r, a, nl::multiply);
            apply_clamp_mask(r, g, cl.non_linear_clamp_upper_limit, cl.non_linear_clamp_lower_limit);
            nisa::tensor_copy(dgu[s![0..k, 0, it, ..]], r);
            apply_activation(a, g, p.activation_type);
            nisa::tensor_tensor(r, dik, a, nl::multiply);
            apply_clamp_mask(r, u, cl.linear_clamp_upper_limit, cl.linear_clamp_lower_limit);
            nisa::tensor_copy(dgu[s![0..k, 1, it, ..]], r);
        }
        dgu
    }

    /// `dW_down[e][:, shard] += interᵀ·dz` (`inter_t` `[128, B/128, I]`
    /// tokens on the partitions), per intermediate tile and 512 columns.
    #[nki_helper]
    pub fn compute_down_projection_weight_grad(p: MOEBwdParameters, d: BwdDims, inter_t: Sbuf, dz: Sbuf, expert: Sbuf) {
        let h: i64 = d.h;
        for it in 0..d.num_i_tiles {
            let i0 = it * TILE_SIZE;
            let k: i64 = tile_rows(d.i_tp, it);
            for cb in 0..d.h_shard.div_ceil(PSUM_SIZE) {
                let c0 = d.h_offset + cb * PSUM_SIZE;
                let w: i64 = PSUM_SIZE.min(d.h_shard - cb * PSUM_SIZE);
                let ps = nl::ndarray([TILE_SIZE, PSUM_SIZE], nl::float32, buffer = nl::psum);
                for j in 0..d.num_b_tiles {
                    nisa::nc_matmul(ps[s![0..k, 0..w]], inter_t[s![.., j, i0..i0 + k]], dz[s![.., j, c0..c0 + w]]);
                }
                let dst =
                    p.grads.down_proj_weight_grad.ap([[h, k], [1, w]], offset = i0 * h + c0, scalar_offset = expert, indirect_dim = 0);
                accumulate_into(dst, ps[s![0..k, 0..w]]);
            }
        }
    }

    /// `dW_gu[e][shard, g] += x[tok]ᵀ·dgᵀ / duᵀ` (`dgu_t` `[128, B/128, 2,
    /// I]` tokens on the partitions), per hidden tile, projection and 512
    /// columns.
    #[nki_helper]
    pub fn compute_gate_up_projection_weight_grad(p: MOEBwdParameters, d: BwdDims, bt: BlockTokens, dgu_t: Sbuf) {
        let i: i64 = d.i_tp;
        for c in 0..d.h_shard.div_ceil(TILE_SIZE) {
            let h0 = d.h_offset + c * TILE_SIZE;
            let w: i64 = tile_rows(d.h_shard, c);
            for g in 0..GUP_PROJ_DIM {
                for cb in 0..i.div_ceil(PSUM_SIZE) {
                    let i0 = cb * PSUM_SIZE;
                    let n: i64 = PSUM_SIZE.min(i - cb * PSUM_SIZE);
                    let ps = nl::ndarray([TILE_SIZE, PSUM_SIZE], nl::float32, buffer = nl::psum);
                    for j in 0..d.num_b_tiles {
                        nisa::nc_matmul(ps[s![0..w, 0..n]], bt.x[s![.., j, h0..h0 + w]], dgu_t[s![.., j, g, i0..i0 + n]]);
                    }
                    let dst = p.grads.gate_up_proj_weight_grad.ap(
                        [[GUP_PROJ_DIM * i, w], [1, n]],
                        offset = h0 * GUP_PROJ_DIM * i + g * i + i0,
                        scalar_offset = bt.expert,
                        indirect_dim = 0,
                    );
                    accumulate_into(dst, ps[s![0..w, 0..n]]);
                }
            }
        }
    }

    /// `dx[tok][:, shard] (+)= dgᵀ·W_gateᵀ + duᵀ·W_upᵀ`: the gate/up
    /// weights of this shard loaded transposed (intermediate dim on the
    /// partitions), a PSUM accumulation over both projections' intermediate
    /// tiles per 128 tokens and 512 columns, added onto the rows gathered by
    /// token when accumulating, scattered back by token.
    #[nki_helper]
    pub fn compute_hidden_states_grad(p: MOEBwdParameters, d: BwdDims, bt: BlockTokens, dgu: Sbuf) {
        let i: i64 = d.i_tp;
        let hs: i64 = d.h_shard;
        let skip = p.skip_dma.skip_token;
        let w_t = nl::ndarray([TILE_SIZE, GUP_PROJ_DIM, d.num_i_tiles, hs], p.compute_dtype, buffer = nl::sbuf);
        for g in 0..GUP_PROJ_DIM {
            for it in 0..d.num_i_tiles {
                let k: i64 = tile_rows(i, it);
                let off = d.h_offset * GUP_PROJ_DIM * i + g * i + it * TILE_SIZE;
                let src = p.inputs.gate_up_proj_weight.ap(
                    [[1, k], [GUP_PROJ_DIM * i, hs]],
                    offset = off,
                    scalar_offset = bt.expert,
                    indirect_dim = 0,
                );
                load_as(w_t[s![0..k, g, it, ..]], src, p.skip_dma.skip_weight);
            }
        }
        let dx = p.grads.hidden_states_grad;
        let rows = nl::ndarray([TILE_SIZE, hs], dx.dtype(), buffer = nl::sbuf);
        for j in 0..d.num_b_tiles {
            let idx = bt.token_indices[s![.., j..j + 1]];
            if p.is_tensor_update_accumulating {
                // Skipped tokens' rows are not gathered but are added to below
                // (and then not scattered): they must hold something defined.
                if skip {
                    nisa::memset(rows, 0.0);
                }
                gather_token_rows(rows, dx, idx, d.h_offset, skip);
            }
            for cb in 0..hs.div_ceil(PSUM_SIZE) {
                let c0 = cb * PSUM_SIZE;
                let w: i64 = PSUM_SIZE.min(hs - cb * PSUM_SIZE);
                let ps = nl::ndarray([TILE_SIZE, PSUM_SIZE], nl::float32, buffer = nl::psum);
                for g in 0..GUP_PROJ_DIM {
                    for it in 0..d.num_i_tiles {
                        let k: i64 = tile_rows(i, it);
                        nisa::nc_matmul(
                            ps[s![.., 0..w]],
                            dgu[s![0..k, g, it, j * TILE_SIZE..(j + 1) * TILE_SIZE]],
                            w_t[s![0..k, g, it, c0..c0 + w]],
                        );
                    }
                }
                let dst = rows[s![.., c0..c0 + w]];
                if p.is_tensor_update_accumulating {
                    nisa::tensor_tensor(dst, dst, ps[s![.., 0..w]], nl::add);
                } else {
                    nisa::tensor_copy(dst, ps[s![.., 0..w]]);
                }
            }
            scatter_token_rows(dx, rows, idx, d.h_offset, skip);
        }
    }

    /// The bias gradients: `db_down[e][shard] += Σ_b dz` (a matmul by a
    /// ones column), and on the first program `db_gu[e] += Σ_b [dg; du]`.
    #[nki_helper]
    pub fn compute_bias_grads(p: MOEBwdParameters, d: BwdDims, bt: BlockTokens, dgu: Sbuf) {
        let (down_bias, gate_up_bias) = (p.grads.down_proj_bias_grad, p.grads.gate_and_up_proj_bias_grad);
        if let Some(db) = down_bias {
            let ones = nl::ndarray([TILE_SIZE, 1], p.compute_dtype, buffer = nl::sbuf);
            nisa::memset(ones, 1.0);
            for cb in 0..d.h_shard.div_ceil(PSUM_SIZE) {
                let c0 = d.h_offset + cb * PSUM_SIZE;
                let w: i64 = PSUM_SIZE.min(d.h_shard - cb * PSUM_SIZE);
                let ps = nl::ndarray([1, PSUM_SIZE], nl::float32, buffer = nl::psum);
                for j in 0..d.num_b_tiles {
                    nisa::nc_matmul(ps[s![.., 0..w]], ones, bt.dz[s![.., j, c0..c0 + w]]);
                }
                let h: i64 = d.h;
                accumulate_into(db.ap([[h, 1], [1, w]], offset = c0, scalar_offset = bt.expert, indirect_dim = 0), ps[s![.., 0..w]]);
            }
        }
        if let Some(gb) = gate_up_bias {
            if d.shard_id == 0 {
                let sums = nl::ndarray([TILE_SIZE, 1], nl::float32, buffer = nl::sbuf);
                for g in 0..GUP_PROJ_DIM {
                    for it in 0..d.num_i_tiles {
                        let k: i64 = tile_rows(d.i_tp, it);
                        nisa::tensor_reduce(sums[s![0..k, ..]], nl::add, dgu[s![0..k, g, it, ..]], 1);
                        let off = g * d.i_tp + it * TILE_SIZE;
                        accumulate_into(
                            gb.ap([[1, k], [1, 1]], offset = off, scalar_offset = bt.expert, indirect_dim = 0),
                            sums[s![0..k, ..]],
                        );
                    }
                }
            }
        }
    }

    /// The forward's tensors as its loaders read them (no biases).
    #[nki_helper]
    pub fn forward_inputs(p: MOEBwdParameters) -> InputTensors {
        InputTensors {
            token_position_to_id: p.inputs.token_position_to_id,
            block_to_expert: p.inputs.block_to_expert,
            hidden_states: p.inputs.hidden_states,
            gate_up_proj_weight: p.inputs.gate_up_proj_weight,
            gate_and_up_proj_bias: None,
            down_proj_bias: None,
            down_proj_weight: p.inputs.down_proj_weight,
            expert_affinities_masked: p.inputs.expert_affinities_masked,
        }
    }

    /// The forward's options as its loaders read them (rows unscaled).
    #[nki_helper]
    pub fn forward_configs(p: MOEBwdParameters) -> Configs {
        let cl = p.clamp_limits;
        Configs {
            scaling_mode: ExpertAffinityScaleMode::NO_SCALE,
            skip_dma: p.skip_dma,
            compute_dtype: p.compute_dtype,
            is_tensor_update_accumulating: p.is_tensor_update_accumulating,
            linear_bias: false,
            activation_function: p.activation_type,
            gate_clamp_upper_limit: cl.non_linear_clamp_upper_limit,
            gate_clamp_lower_limit: cl.non_linear_clamp_lower_limit,
            up_clamp_upper_limit: cl.linear_clamp_upper_limit,
            up_clamp_lower_limit: cl.linear_clamp_lower_limit,
        }
    }

    /// All gradients of one block (module docs).
    #[nki_helper]
    pub fn process_block(p: MOEBwdParameters, d: BwdDims, block_idx: i64, expert: Sbuf) {
        let (inps, cfg) = (forward_inputs(p), forward_configs(p));
        let fwd_dims = dimension_sizes(inps, d.b);
        let (tok, x) = load_block_tokens(inps, cfg, fwd_dims, block_idx, expert);
        let dz = compute_down_projection_output_grad(p, d, block_idx, tok, expert);
        let bt = BlockTokens { token_indices: tok, expert, x, dz };
        let gup = _load_gate_up_projection_checkpoint(p, d, block_idx);
        let inter = compute_intermediate_states(gup, cfg, fwd_dims);
        let di = compute_intermediate_grad(p, d, transpose_block_rows(dz, d), expert);
        let dgu = compute_gate_up_projection_output_grad(p, d, di, gup);
        let inter_t = nl::ndarray([TILE_SIZE, d.num_b_tiles, d.i_tp], p.compute_dtype, buffer = nl::sbuf);
        transpose_to_tokens(inter, inter_t, d);
        compute_down_projection_weight_grad(p, d, inter_t, dz, expert);
        compute_hidden_states_grad(p, d, bt, dgu);
        let dgu_t = nl::ndarray([TILE_SIZE, d.num_b_tiles, GUP_PROJ_DIM, d.i_tp], p.compute_dtype, buffer = nl::sbuf);
        for g in 0..GUP_PROJ_DIM {
            transpose_to_tokens(dgu[s![.., g, .., ..]], dgu_t[s![.., .., g, ..]], d);
        }
        compute_gate_up_projection_weight_grad(p, d, bt, dgu_t);
        compute_bias_grads(p, d, bt, dgu);
    }

    /// Every block's gradients into the zeroed gradients of `p`.
    #[nki_helper]
    pub fn blockwise_mm_bwd_dropless(p: MOEBwdParameters, programs: i64, shard_id: i64) {
        let d = bwd_dims(p, programs, shard_id);
        initialize_gradient_outputs_shard(p, d);
        let experts = nl::ndarray([1, d.n], nl::int32, buffer = nl::sbuf);
        let n: i64 = d.n;
        nisa::dma_copy(experts, p.inputs.block_to_expert.ap([[1, 1], [1, n]], offset = 0));
        for block_idx in 0..d.n {
            process_block(p, d, block_idx, experts[s![0..1, block_idx..block_idx + 1]]);
        }
    }

    /// The rules of [`bwmm_bwd_violation`](super::bwmm_bwd_violation) and
    /// the tensors' shapes, checked when the kernel is traced.
    #[nki_helper]
    pub fn validate_bwmm_bwd(p: MOEBwdParameters, programs: i64, options: BwdOptions) {
        let k = "blockwise_mm_bwd";
        assert!(p.inputs.hidden_states.ndim() == 2, "{k}: hidden_states must be [T, H], got {}", p.inputs.hidden_states.shape());
        let (t, h) = (p.inputs.hidden_states.shape()[0], p.inputs.hidden_states.shape()[1]);
        let gs = p.inputs.gate_up_proj_weight.shape();
        assert!(
            p.inputs.gate_up_proj_weight.ndim() == 4 && gs[1] == h && gs[2] == 2,
            "{k}: gate_up_proj_weight must be [E, H = {h}, 2, I], got {gs}"
        );
        let (e, i, b) = (gs[0], gs[3], p.block_size);
        let positions = p.inputs.token_position_to_id.shape()[0];
        assert!(b == 128 || b == 256 || b == 512 || b == 1024, "{k}: block_size must be 128, 256, 512 or 1024, got {b}");
        assert!(
            e > 0 && positions > 0 && positions % b == 0,
            "{k}: E = {e} must be positive and token_position_to_id's length {positions} a positive multiple of block_size"
        );
        assert!(i > 0 && i % 2 == 0, "{k}: I = {i} must be positive and even");
        assert!(h > 0 && h % 2 == 0, "{k}: H = {h} must be positive and even");
        assert!(programs >= 1 && programs <= MAX_SHARDS, "{k}: runs on 1 or 2 programs (LNC1 or LNC2), got {programs}");
        assert!(
            h % programs == 0 && (h / programs) % DMA_TRANSPOSE_ALIGN == 0,
            "{k}: H = {h} split over {programs} programs must give a multiple of 32"
        );
        assert!((i / programs) % DMA_TRANSPOSE_ALIGN == 0, "{k}: I = {i} split over {programs} programs must give a multiple of 32");
        let so = options.shard_option;
        assert!(
            so == ShardOption::AUTO || so == ShardOption::SHARD_ON_HIDDEN,
            "{k}: shard_option must be SHARD_ON_HIDDEN or AUTO (the library's implementation), got {so}"
        );
        let ao = options.affinity_option;
        assert!(
            ao == AffinityOption::AFFINITY_ON_H,
            "{k}: affinity_option must be AFFINITY_ON_H (the library scales on the hidden dim only), got {ao}"
        );
        let kt = options.kernel_type_option;
        assert!(kt == KernelTypeOption::DROPLESS, "{k}: kernel_type_option must be DROPLESS (the library's only kernel type), got {kt}");
        assert!(!options.block_tile_size, "{k}: block_tile_size is not implemented (the library reads no tile-size override)");
        let act = p.activation_type;
        assert!(act == ActFnType::SiLU || act == ActFnType::Swish, "{k}: activation_type must be SiLU or Swish, got {act}");
        let n = positions / b;
        check_2d(Some(p.inputs.expert_affinities_masked), k, "expert_affinities_masked", t * e, 1);
        check_3d(Some(p.inputs.down_proj_weight), k, "down_proj_weight", e, i, h);
        let ck = p.inputs.gate_up_proj_act_checkpoint_T.shape();
        assert!(
            p.inputs.gate_up_proj_act_checkpoint_T.ndim() == 4 && ck[0] == n && ck[1] == 2 && ck[2] == i && ck[3] == b,
            "{k}: gate_up_proj_act_checkpoint_T must be [N = {n}, 2, I = {i}, B = {b}], got {ck}"
        );
        check_3d(Some(p.inputs.down_proj_act_checkpoint), k, "down_proj_act_checkpoint", n, b, h);
        check_2d(Some(p.inputs.block_to_expert), k, "block_to_expert", n, 1);
        check_2d(Some(p.inputs.output_hidden_states_grad), k, "output_hidden_states_grad", t, h);
    }

    /// The options only the rules read.
    #[nki_object]
    pub struct BwdOptions {
        /// `shard_option`.
        pub shard_option: ShardOption,
        /// `affinity_option`.
        pub affinity_option: AffinityOption,
        /// `kernel_type_option`.
        pub kernel_type_option: KernelTypeOption,
        /// Whether `block_tile_size` is given.
        pub block_tile_size: bool,
    }

    /// The gradients of the blockwise MoE layer (module docs): returns
    /// `hidden_states_grad` `[T, H]`, `expert_affinities_masked_grad`
    /// `[T·E, 1]`, `gate_up_proj_weight_grad` `[E, H, 2, I]`,
    /// `down_proj_weight_grad` `[E, I, H]`, and with `bias` the bias
    /// gradients `[E, 2, I]` and `[E, H]` in the compute dtype.
    #[nki_kernel]
    pub fn blockwise_mm_bwd(
        #[spread] inputs: BwmmBwdInputs,
        block_size: i64,
        skip_dma: Option<SkipMode>,
        #[default(nl::bfloat16)] compute_dtype: Dtype,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ShardOption::SHARD_ON_HIDDEN)] shard_option: ShardOption,
        #[default(AffinityOption::AFFINITY_ON_H)] affinity_option: AffinityOption,
        #[default(KernelTypeOption::DROPLESS)] kernel_type_option: KernelTypeOption,
        clamp_limits: Option<ClampLimits>,
        #[default(false)] bias: bool,
        #[default(ActFnType::SiLU)] activation_type: ActFnType,
        block_tile_size: Option<i64>,
    ) -> Outputs {
        let mut skip = SkipMode { skip_token: false, skip_weight: false };
        if let Some(m) = skip_dma {
            skip = m;
        }
        let mut clamps = ClampLimits {
            linear_clamp_upper_limit: None,
            linear_clamp_lower_limit: None,
            non_linear_clamp_upper_limit: None,
            non_linear_clamp_lower_limit: None,
        };
        if let Some(c) = clamp_limits {
            clamps = c;
        }
        let grads = allocate_gradient_outputs(inputs, bias, compute_dtype);
        let p = MOEBwdParameters {
            inputs,
            grads,
            block_size,
            skip_dma: skip,
            compute_dtype,
            is_tensor_update_accumulating,
            clamp_limits: clamps,
            activation_type,
        };
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let shard_id = if grid { nl::program_id(0) } else { 0 };
        let options = BwdOptions { shard_option, affinity_option, kernel_type_option, block_tile_size: block_tile_size.is_some() };
        validate_bwmm_bwd(p, programs, options);
        blockwise_mm_bwd_dropless(p, programs, shard_id);
        let (dx, daff) = (grads.hidden_states_grad, grads.expert_affinities_masked_grad);
        let (dgu, ddown) = (grads.gate_up_proj_weight_grad, grads.down_proj_weight_grad);
        let (gate_and_up_proj_bias_grad, down_proj_bias_grad) = (grads.gate_and_up_proj_bias_grad, grads.down_proj_bias_grad);
        if let Some(gb) = gate_and_up_proj_bias_grad {
            if let Some(db) = down_proj_bias_grad {
                return Outputs(dx, daff, dgu, ddown, gb, db);
            }
        }
        Outputs(dx, daff, dgu, ddown)
    }
}

/// Why a `blockwise_mm_bwd` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwmmBwdRule {
    /// `block_size` is not 128, 256, 512 or 1024.
    BlockSize,
    /// No experts, or `token_position_to_id` is not whole blocks.
    Blocks,
    /// `I` is not positive and even.
    IntermediateEven,
    /// `H` is not positive and even.
    HiddenEven,
    /// Not one or two programs.
    Programs,
    /// `H / P` is not a multiple of 32.
    HiddenShard,
    /// `I / P` is not a multiple of 32.
    IntermediateShard,
    /// A shard option other than `SHARD_ON_HIDDEN` / `AUTO`.
    ShardOption,
    /// `AFFINITY_ON_I`.
    AffinityOption,
    /// `DROPPING`.
    KernelType,
    /// `block_tile_size` given.
    BlockTileSize,
    /// A GELU activation.
    Activation,
}

impl BwmmBwdRule {
    /// The rule in words (the kernel's assert says the same, with the values).
    pub const fn message(self) -> &'static str {
        match self {
            BwmmBwdRule::BlockSize => "blockwise_mm_bwd: block_size must be 128, 256, 512 or 1024",
            BwmmBwdRule::Blocks => {
                "blockwise_mm_bwd: E must be positive and token_position_to_id's length a positive multiple of block_size"
            }
            BwmmBwdRule::IntermediateEven => "blockwise_mm_bwd: I must be positive and even",
            BwmmBwdRule::HiddenEven => "blockwise_mm_bwd: H must be positive and even",
            BwmmBwdRule::Programs => "blockwise_mm_bwd: runs on 1 or 2 programs (LNC1 or LNC2)",
            BwmmBwdRule::HiddenShard => "blockwise_mm_bwd: H split over the programs must give a multiple of 32",
            BwmmBwdRule::IntermediateShard => "blockwise_mm_bwd: I split over the programs must give a multiple of 32",
            BwmmBwdRule::ShardOption => "blockwise_mm_bwd: shard_option must be SHARD_ON_HIDDEN or AUTO (the library's implementation)",
            BwmmBwdRule::AffinityOption => {
                "blockwise_mm_bwd: affinity_option must be AFFINITY_ON_H (the library scales on the hidden dim only)"
            }
            BwmmBwdRule::KernelType => "blockwise_mm_bwd: kernel_type_option must be DROPLESS (the library's only kernel type)",
            BwmmBwdRule::BlockTileSize => "blockwise_mm_bwd: block_tile_size is not implemented (the library reads no tile-size override)",
            BwmmBwdRule::Activation => "blockwise_mm_bwd: activation_type must be SiLU or Swish",
        }
    }
}

crate::__blockwise_call! {
    /// A backward call as the rules read it: the sizes and the options.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct BwmmBwdCall {
        /// `shard_option`.
        pub shard_option: ShardOption,
        /// `affinity_option`.
        pub affinity_option: AffinityOption,
        /// `kernel_type_option`.
        pub kernel_type_option: KernelTypeOption,
        /// Whether `block_tile_size` is given.
        pub block_tile_size: bool,
        /// `activation_type`.
        pub activation: ActFnType,
    }
}

/// The first rule `c` breaks.
pub const fn bwmm_bwd_violation(c: BwmmBwdCall) -> Option<BwmmBwdRule> {
    if !matches!(c.block_size, 128 | 256 | 512 | 1024) {
        return Some(BwmmBwdRule::BlockSize);
    }
    if !whole_blocks(c.experts, c.positions, c.block_size) {
        return Some(BwmmBwdRule::Blocks);
    }
    if c.intermediate <= 0 || c.intermediate % 2 != 0 {
        return Some(BwmmBwdRule::IntermediateEven);
    }
    if c.hidden <= 0 || c.hidden % 2 != 0 {
        return Some(BwmmBwdRule::HiddenEven);
    }
    if c.programs < 1 || c.programs > MAX_SHARDS {
        return Some(BwmmBwdRule::Programs);
    }
    if c.hidden % c.programs != 0 || (c.hidden / c.programs) % DMA_TRANSPOSE_ALIGN != 0 {
        return Some(BwmmBwdRule::HiddenShard);
    }
    if (c.intermediate / c.programs) % DMA_TRANSPOSE_ALIGN != 0 {
        return Some(BwmmBwdRule::IntermediateShard);
    }
    if !matches!(c.shard_option, ShardOption::AUTO | ShardOption::SHARD_ON_HIDDEN) {
        return Some(BwmmBwdRule::ShardOption);
    }
    if !matches!(c.affinity_option, AffinityOption::AFFINITY_ON_H) {
        return Some(BwmmBwdRule::AffinityOption);
    }
    if !matches!(c.kernel_type_option, KernelTypeOption::DROPLESS) {
        return Some(BwmmBwdRule::KernelType);
    }
    if c.block_tile_size {
        return Some(BwmmBwdRule::BlockTileSize);
    }
    if !silu_gate(c.activation) {
        return Some(BwmmBwdRule::Activation);
    }
    None
}

/// A `blockwise_mm_bwd` call checked at compile time, or a compile error
/// naming the rule it breaks. Options not given take the kernel's defaults
/// (two programs, `SHARD_ON_HIDDEN`, `AFFINITY_ON_H`, `DROPLESS`, SiLU).
///
/// ```
/// let c = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512);
/// assert_eq!(c.programs, 2);
/// ```
///
/// ```compile_fail
/// // 80 hidden columns per program are not a multiple of 32.
/// let c = nkilib::bwmm_bwd_config!(hidden = 160, intermediate = 128, experts = 2, block_size = 256, positions = 4 * 256);
/// ```
#[macro_export]
macro_rules! bwmm_bwd_config {
    ($($args:tt)*) => {
        $crate::__blockwise_config!(
            [$crate::experimental::moe::blockwise_mm_backward::BwmmBwdCall],
            [$crate::experimental::moe::blockwise_mm_backward::bwmm_bwd_violation],
            {
                shard_option: $crate::experimental::moe::blockwise_mm_backward::ShardOption::SHARD_ON_HIDDEN,
                affinity_option: $crate::experimental::moe::blockwise_mm_backward::AffinityOption::AFFINITY_ON_H,
                kernel_type_option: $crate::experimental::moe::blockwise_mm_backward::KernelTypeOption::DROPLESS,
                block_tile_size: false,
                activation: $crate::experimental::moe::blockwise_mm_backward::ActFnType::SiLU,
            },
            $($args)*
        )
    };
}
