//! The MoE paths' shared pieces: the library's `moe_tkg_utils`, the call's
//! tensors and options, and one expert's tensors selected into the layouts
//! the `mlp_tkg` phases read.
//!
//! The library selects an expert by a view of the stacked tensors (the
//! expert id read on the device in the selective path); here each tensor of
//! the expert is copied by one DMA whose start comes from an `[1, 1]` id tile
//! (`scalar_offset`), into a private HBM tensor of the `mlp` layout: gate and
//! up weights `[H, I]` out of the fused `[E, H, 2, I]`, down weights `[I, H]`,
//! biases `[1, I]` / `[1, H]`, and the fp8 dequantization scales broadcast to
//! the `[128, n]` partition layout the `mlp_tkg` phases read (the library's
//! `reshape_scale_for_mlp`).

pub use kernel::*;

/// The tensors, options and expert selection.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPQuantizationParameters, MLPTensors};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{MLPTKGConstants, projection_weights, tkg_dims};
    use crate::mlp::mlp_tkg::mlp_tkg_down_projection::process_down_projection;
    use crate::mlp::mlp_tkg::mlp_tkg_gate_up_projection::process_gate_up_projection;
    pub use crate::utils::common_types::{ExpertAffinityScaleMode, QuantizationType};
    use nki::prelude::*;

    /// The gate half of the fused gate/up dim (the library's `GateUpDim.GATE`).
    pub const GATE: i64 = 0;
    /// The up half of the fused gate/up dim (`GateUpDim.UP`).
    pub const UP: i64 = 1;

    /// The tensors of a `moe_tkg` call, in its signature's order (which
    /// spreads them in two parts, around `is_all_expert`).
    #[nki_object]
    pub struct MoeTkgTensors {
        /// Hidden rows `[T, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub hidden_input: Tensor,
        /// Fused gate/up weights `[E_L, H, 2, I]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4)]
        pub expert_gate_up_weights: Tensor,
        /// Down weights `[E_L, I, H]`.
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float4_e2m1fn_x4, float8_e4m3fn_x4)]
        pub expert_down_weights: Tensor,
        /// Affinities `[T, E]` (all-expert: of the global experts).
        #[dtypes(float32, bfloat16, float16)]
        pub expert_affinities: Tensor,
        /// Top-k expert ids `[T, K]`.
        #[dtypes(int32, uint32)]
        pub expert_index: Tensor,
        /// `[1, 1]` rank whose local experts are `E_L · rank ..`.
        #[dtypes(int32, uint32)]
        pub rank_id: Option<Tensor>,
        /// Gate/up bias `[E_L, 2, I]`.
        #[dtypes(float32, bfloat16, float16)]
        pub expert_gate_up_bias: Option<Tensor>,
        /// Down bias `[E_L, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub expert_down_bias: Option<Tensor>,
        /// `ROW` dequantization scales of the gate/up weights `[E_L, 2, I]`.
        #[dtypes(float32, uint8)]
        pub expert_gate_up_weights_scale: Option<Tensor>,
        /// `ROW` dequantization scales of the down weights `[E_L, H]`.
        #[dtypes(float32, uint8)]
        pub expert_down_weights_scale: Option<Tensor>,
    }

    /// The options both paths read.
    #[nki_object]
    pub struct MoeTkgOptions {
        /// Whether each expert's output is multiplied by its affinity.
        pub expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        /// All-expert: zero the affinity of a local expert a token did not select.
        pub mask_unselected_experts: bool,
        /// `NONE` or `ROW` (fp8 weights with their scales).
        pub quantization_type: QuantizationType,
        /// The gate activation and the clamps (no `skip_gate_proj`).
        pub act: MLPActivationParameters,
    }

    /// The `mlp_tkg` dimensions of `t` tokens over `n` hidden shards (this
    /// program's `shard_id`), both column tilings off as the library's
    /// expert paths set them.
    #[nki_helper]
    pub fn expert_dims(t: i64, h: i64, i: i64, n: i64, shard_id: i64) -> MLPTKGConstants {
        tkg_dims(t, h, i, n, shard_id, false, false)
    }

    /// A `[1, 1]` int32 id tile holding `e`, for the experts the all-expert
    /// path walks in order.
    #[nki_helper]
    pub fn expert_id_tile(e: i64) -> Sbuf {
        let id = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::memset(id, e as f64);
        id
    }

    /// Row `id` of a `[E, H]` tensor (the down bias) into a private `[1, H]`.
    #[nki_helper]
    pub fn select_expert_row(stacked: Hbm, id: Sbuf) -> Hbm {
        let h = stacked.shape()[1];
        let row = nl::ndarray([1, h], stacked.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(row, stacked.ap([[h, 1], [1, h]], offset = 0, scalar_offset = id, indirect_dim = 0));
        row
    }

    /// The weights and biases of the expert whose id is in `id` `[1, 1]`, in
    /// private HBM in `mlp`'s layouts (module docs).
    #[nki_helper]
    pub fn select_expert_weights(w: MoeTkgTensors, id: Sbuf) -> MLPTensors {
        let gu = w.expert_gate_up_weights;
        let [_, h, _, i] = gu.shape();
        let gate = nl::ndarray([h, i], gu.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(gate, gu.ap([[2 * i, h], [1, i]], offset = GATE * i, scalar_offset = id, indirect_dim = 0));
        let up = nl::ndarray([h, i], gu.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(up, gu.ap([[2 * i, h], [1, i]], offset = UP * i, scalar_offset = id, indirect_dim = 0));
        let dw = w.expert_down_weights;
        let down = nl::ndarray([i, h], dw.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(down, dw.ap([[h, i], [1, h]], offset = 0, scalar_offset = id, indirect_dim = 0));
        // Absent biases stay None; given ones are replaced by the expert's rows.
        let gub = w.expert_gate_up_bias;
        let mut gate_b = gub;
        let mut up_b = gub;
        if let Some(b) = gub {
            let g = nl::ndarray([1, i], b.dtype(), buffer = nl::private_hbm);
            nisa::dma_copy(g, b.ap([[i, 1], [1, i]], offset = GATE * i, scalar_offset = id, indirect_dim = 0));
            let u = nl::ndarray([1, i], b.dtype(), buffer = nl::private_hbm);
            nisa::dma_copy(u, b.ap([[i, 1], [1, i]], offset = UP * i, scalar_offset = id, indirect_dim = 0));
            gate_b = Some(g);
            up_b = Some(u);
        }
        let db = w.expert_down_bias;
        let mut down_b = db;
        if let Some(b) = db {
            down_b = Some(select_expert_row(b, id));
        }
        MLPTensors {
            gate_proj_weights_tensor: gate,
            up_proj_weights_tensor: up,
            down_proj_weights_tensor: down,
            normalization_weights_tensor: None,
            normalization_bias_tensor: None,
            gate_proj_bias_tensor: gate_b,
            up_proj_bias_tensor: up_b,
            down_proj_bias_tensor: down_b,
            fused_add_tensor: None,
        }
    }

    /// The `ROW` scales of the expert in `id`, each broadcast to `[128, n]`
    /// (the library's `reshape_scale_for_mlp`); none without quantization.
    #[nki_helper]
    pub fn select_expert_scales(w: MoeTkgTensors, id: Sbuf, quantization_type: QuantizationType) -> MLPQuantizationParameters {
        let mut q = weight_scales(quantization_type, None, None, None);
        let (gate_up_scale, down_scale) = (w.expert_gate_up_weights_scale, w.expert_down_weights_scale);
        if let Some(gus) = gate_up_scale {
            if let Some(dws) = down_scale {
                let i = gus.shape()[2];
                let h = dws.shape()[1];
                let gate = nl::ndarray([H0, i], gus.dtype(), buffer = nl::private_hbm);
                nisa::dma_copy(gate, gus.ap([[0, H0], [1, i]], offset = GATE * i, scalar_offset = id, indirect_dim = 0));
                let up = nl::ndarray([H0, i], gus.dtype(), buffer = nl::private_hbm);
                nisa::dma_copy(up, gus.ap([[0, H0], [1, i]], offset = UP * i, scalar_offset = id, indirect_dim = 0));
                let down = nl::ndarray([H0, h], dws.dtype(), buffer = nl::private_hbm);
                nisa::dma_copy(down, dws.ap([[0, H0], [1, h]], offset = 0, scalar_offset = id, indirect_dim = 0));
                q = weight_scales(quantization_type, Some(gate), Some(up), Some(down));
            }
        }
        q
    }

    /// The scales of `quantization_type` with these weight scales (the
    /// expert paths take no input scales).
    #[nki_helper]
    pub fn weight_scales(
        quantization_type: QuantizationType,
        gate: Option<Hbm>,
        up: Option<Hbm>,
        down: Option<Hbm>,
    ) -> MLPQuantizationParameters {
        MLPQuantizationParameters {
            quantization_type,
            gate_w_scale: gate,
            up_w_scale: up,
            down_w_scale: down,
            gate_up_in_scale: None,
            down_in_scale: None,
            clipping_bound: 0.0,
        }
    }

    /// One expert's MLP of the `dims.t` tokens in `x_sb` `[128, t, H1s]`
    /// with `mlp_tkg`'s phases: the gated product in `io`, the down
    /// projection (plus bias) into a private `[t, H]` HBM row block, of which
    /// this program's hidden shard returns as `[t, H/n]` in `io` (tokens on
    /// the partitions).
    #[nki_helper]
    pub fn expert_mlp(
        x_sb: Sbuf,
        ew: MLPTensors,
        q: MLPQuantizationParameters,
        act: MLPActivationParameters,
        dims: MLPTKGConstants,
        io: Dtype,
    ) -> Sbuf {
        let gu = nl::ndarray([H0, dims.i_tiles, dims.t], io, buffer = nl::sbuf);
        let gate = projection_weights(ew.gate_proj_weights_tensor, ew.gate_proj_bias_tensor, q.gate_w_scale, q);
        let up = projection_weights(ew.up_proj_weights_tensor, ew.up_proj_bias_tensor, q.up_w_scale, q);
        process_gate_up_projection(x_sb, gate, up, gu, act, dims);
        let down = nl::ndarray([dims.t, dims.h], io, buffer = nl::private_hbm);
        let dw = projection_weights(ew.down_proj_weights_tensor, ew.down_proj_bias_tensor, q.down_w_scale, q);
        process_down_projection(gu, dw, down, false, dims);
        let (c0, hs) = (dims.shard_id * dims.h_per_shard, dims.h_per_shard);
        let o = nl::ndarray([dims.t, hs], io, buffer = nl::sbuf);
        nisa::dma_copy(o, down[s![.., c0..c0 + hs]]);
        o
    }
}
