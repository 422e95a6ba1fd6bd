//! The MoE block's shared pieces: the library's `moe_block_tkg_utils`, the
//! call's dimensions and configuration bundles, and the change from the
//! norm's `[128, T, H/128]` layout back to token rows `[T, H]` that the
//! router and the experts read.
//!
//! The norm writes element `h` of token `t` at `[p, t, c]` with, for `n`
//! hidden shards (`H2 = H/128/n`), `h = (c / H2)·(H/n) + p·H2 + c % H2`
//! (see [`norm_tkg_utils`](crate::subkernels::norm_tkg_utils)), or with
//! `hidden_dim_tp` (the MX forms) `h = c·128 + p`; the rows are gathered
//! back by strided DMAs whose destination access pattern is that layout.

pub use kernel::*;

/// The dimensions, bundles and the layout change.
#[nki::nki_module]
pub mod kernel {
    use crate::router_topk::router_topk::{XSB_LAYOUT_TP201, XSB_LAYOUT_TP2013};
    use nki::prelude::*;

    /// Partitions: the hidden dim is folded onto them as `[128, H/128]`.
    pub const PMAX: i64 = nl::tile_size::pmax;

    /// The call's dimensions (the library's `MoEBlockTKGDims`).
    #[nki_object]
    pub struct MoEBlockTKGDims {
        /// Batch size.
        pub b: i64,
        /// Sequence length.
        pub s: i64,
        /// Tokens, `B · S`.
        pub t: i64,
        /// Hidden size.
        pub h: i64,
        /// Hidden tiles on the free dim, `H / 128`.
        pub h_free: i64,
        /// Hidden tiles per program, `H / 128 / n_prgs`.
        pub h_free_shard: i64,
        /// Global experts (the router's columns).
        pub e: i64,
        /// Experts per token.
        pub k: i64,
        /// Programs of the launch.
        pub n_prgs: i64,
        /// This program.
        pub prg_id: i64,
        /// The count the norm's mean square divides by.
        pub hidden_actual: i64,
    }

    /// The expert weights' quantization (the library's `QuantizationConfig`).
    #[nki_object]
    pub struct QuantizationConfig {
        /// The expert weights are an MX form (`float4_e2m1fn_x4`, `float8_e4m3fn_x4`).
        pub is_moe_weight_mx: bool,
    }

    /// How the experts run (the library's `ExpertConfig`).
    #[nki_object]
    pub struct ExpertConfig {
        /// Every local expert on every token, else each token's top-k.
        pub is_all_expert: bool,
        /// A shared expert's weights were given.
        pub has_shared_expert: bool,
    }

    /// The dimensions of a call on `inp` `[B, S, H]` routed by
    /// `router_weights` `[H, E]` to `top_k` experts.
    #[nki_helper]
    pub fn parse_moe_block_config(inp: Hbm, router_weights: Hbm, top_k: i64, hidden_actual: Option<i64>) -> MoEBlockTKGDims {
        assert!(inp.ndim() == 3, "moe_block_tkg: inp must be [B, S, H], got {}", inp.shape());
        assert!(router_weights.ndim() == 2, "moe_block_tkg: router_weights must be [H, E], got {}", router_weights.shape());
        let [b, s, h] = inp.shape();
        let n_prgs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let prg_id = if n_prgs > 1 { nl::program_id(0) } else { 0 };
        MoEBlockTKGDims {
            b,
            s,
            t: b * s,
            h,
            h_free: h / PMAX,
            h_free_shard: h / PMAX / n_prgs,
            e: router_weights.shape()[1],
            k: top_k,
            n_prgs,
            prg_id,
            hidden_actual: hidden_actual.unwrap_or(h),
        }
    }

    /// The token rows `[T, H]` in `dtype` (private HBM) of `norm` `[128, T,
    /// H/128]` (HBM or SBUF) written in `layout` (module docs): the router's
    /// `XSB_LAYOUT_TP102` (one hidden shard), `XSB_LAYOUT_TP2013` (two) or
    /// `XSB_LAYOUT_TP201` (`h = c·128 + p`).
    #[nki_helper]
    pub fn norm_rows(norm: Tensor, layout: i64, dtype: Dtype) -> Hbm {
        let [p, t, h_free] = norm.shape();
        let h = p * h_free;
        let tile = nl::ndarray([p, t, h_free], norm.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(tile, norm);
        let mut src = tile;
        if dtype != norm.dtype() {
            let cast = nl::ndarray([p, t, h_free], dtype, buffer = nl::sbuf);
            nisa::tensor_copy(cast, tile);
            src = cast;
        }
        let rows = nl::ndarray([t, h], dtype, buffer = nl::private_hbm);
        if layout == XSB_LAYOUT_TP201 {
            nisa::dma_copy(rows.ap([[1, p], [h, t], [p, h_free]]), src);
        } else {
            let shards = if layout == XSB_LAYOUT_TP2013 { 2 } else { 1 };
            let h2 = h_free / shards;
            for sh in 0..shards {
                let dst = rows.ap([[h2, p], [h, t], [1, h2]], offset = sh * (h / shards));
                nisa::dma_copy(dst, src[s![.., .., sh * h2..(sh + 1) * h2]]);
            }
        }
        rows
    }
}
