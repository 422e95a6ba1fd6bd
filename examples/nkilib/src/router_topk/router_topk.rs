//! The NKI library's `router_topk`: the Mixture-of-Experts router. For `T`
//! tokens of hidden size `H` and `E` experts it computes the router logits
//! `x @ w (+ w_bias)`, activates them (softmax or sigmoid over the experts),
//! picks the `k <= 8` best experts of each token and writes their affinities,
//! scattered back to `[T, E]` with zeros elsewhere, and their indices.
//!
//! Loop structure (each LNC program takes its share of the tokens with
//! `shard_on_tokens`):
//!
//! ```text
//! w_sb = load w as [128, H/128, E]                  # hidden rows on the partitions
//! bias = w_bias broadcast to [min(T, 128), E]      # fp32
//! for each tile of up to 128 tokens:
//!     psum[t, E] = Σ_h-tiles x_tile[128, t]ᵀ · w_sb[:, h, :]     # nc_matmul
//!     logits[t, E] = psum + bias                    # fp32, stored to router_logits
//! ACT1 (router_pre_norm):   a = activation(logits)  over all E experts
//! topK:                     top8 = max8(a or logits); idx = nc_find_index8(.., top8)
//!                           keep the first k of each; store idx to expert_index
//! ACT2 (not router_pre_norm): activation of the k selected logits
//! Norm (router_pre_norm and norm_topk_prob): a_topk / Σ a_topk
//! Scatter (ACT2, or ACT1 with Norm) into expert_affinities [T, E]:
//!     one-hot: mask = Σ_j (iota(E) == idx_j); affinities = mask · a
//!     indirect DMA: zero the rows, then DMA each a_topk[:, j] to the flat
//!                   offset t·E + idx_j of each token
//! ACT1 without Norm: the full activation a is stored as expert_affinities.
//! ```
//!
//! The softmax is the Scalar Engine's: the row max negated by a Vector Engine
//! reduction, `exp(v - max)` with its row sum accumulated by the same
//! instruction, the sum's reciprocal, a multiply. In the one-hot ACT2 path the
//! softmax of the `k` selected logits is formed over all `E` experts with the
//! selected logits' max and sum, so that the mask leaves exactly the top-k
//! softmax. Everything after the matmul stays in fp32; the outputs take the
//! dtypes of the tensors the caller passes (`router_logits`, `expert_affinities`
//! and `expert_index`, which the kernel writes and returns, as the library's
//! `nt.mutable_tensor` parameters).
//!
//! **Ties.** `max8` returns the 8 largest values in descending order and
//! `nc_find_index8` gives, for equal values, successive matches in ascending
//! index order: among experts with equal scores the lowest index is selected
//! (and listed) first.
//!
//! The library's rules are checked: `x_hbm_layout` 0 (`x` is `[H, T]`) or 1
//! (`[T, H]`), `x_sb_layout` in 0..=2, `k` in 1..=8, `E` at most 512 (and at
//! least 8, the width `max8` searches), `H` a multiple of 128, `SIGMOID` after
//! the top-k (without `router_pre_norm`) only with `use_indirect_dma_scatter`, with the indirect scatter a program's
//! tokens at most 128 or a multiple of 128, `return_eager_affi` on the ACT2
//! path only for `T <= 128`, `shard_on_tokens` only with several programs and
//! at least one token each. The shards are the library's: each program but the
//! last takes `T / programs` tokens (rounded down), the last the rest, so odd
//! `T` splits unevenly (`T = 5` over two programs: 2 and 3 tokens), and the
//! indirect-scatter rule applies to every shard. The library documents the
//! kernel for `T <= 2048`.
//!
//! `act_fn` is the library's enum, [`RouterActFnType`] (`SIGMOID = 0`,
//! `SOFTMAX = 1`); the emitted kernel refuses anything that is not one of its
//! members.
//!
//! Differences from the library, all in how arguments are given:
//! - `x`, `expert_affinities` and `expert_index` are HBM tensors (the DSL's
//!   kernel parameters are), so `x_sb_layout` is checked but, as in the library
//!   for an HBM `x`, the load layout follows `x_hbm_layout`; a caller that
//!   stands for the library's SBUF `x` (`moe_block_tkg`) gives
//!   [`router_topk_config`] the layout the library's `x` has there (`XSB_LAYOUT_*`:
//!   which hidden row each partition holds), so the float32 sums of the
//!   logits add the rows in the library's order;
//! - the bias is broadcast over the tokens by a broadcast DMA instead of the
//!   library's stream-shuffle helper (the same values), or with
//!   `use_PE_broadcast_w_bias` by a ones-vector matmul as the library does;
//! - the `return_eager_affi` output is an HBM `[T, k]` float32 tensor; on the
//!   ACT1 path without Norm (where the library leaves it unwritten) it holds the
//!   selected activations;
//! - with `use_column_tiling`, only the PE column tiles some hidden tile was
//!   accumulated into are summed.
//!
//! `norm_topk_prob` only applies with `router_pre_norm` (the library derives
//! its pipeline from the two flags that way).

// The kernel keeps the library's parameter names (`use_PE_broadcast_w_bias`).
#![allow(non_snake_case)]

use nki::prelude::*;

pub use kernel::*;

/// Why a `router_topk` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterRule {
    /// `x_hbm_layout` is not 0 or 1.
    XHbmLayout,
    /// `x_sb_layout` is not 0, 1 or 2.
    XSbLayout,
    /// `T` is not at least 1.
    Tokens,
    /// `H` is not a positive multiple of 128.
    Hidden,
    /// `E` is not within `8..=512`.
    Experts,
    /// `k` is not within `1..=8`.
    TopK,
    /// SIGMOID after the top-k (without `router_pre_norm`) and without `use_indirect_dma_scatter`.
    SigmoidNeedsIndirectScatter,
    /// With `use_indirect_dma_scatter`, a program's tokens are more than 128
    /// and not a multiple of 128.
    IndirectScatterTokens,
    /// `return_eager_affi` without `router_pre_norm` for `T > 128`.
    EagerTokens,
    /// `shard_on_tokens` with one program, or fewer tokens than programs.
    Sharding,
}

impl RouterRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            RouterRule::XHbmLayout => "router_topk: x_hbm_layout must be 0 ([H, T]) or 1 ([T, H])",
            RouterRule::XSbLayout => "router_topk: x_sb_layout must be 0, 1 or 2",
            RouterRule::Tokens => "router_topk: x must hold at least one token",
            RouterRule::Hidden => "router_topk: H must be a positive multiple of 128",
            RouterRule::Experts => "router_topk: E must be within 8..=512",
            RouterRule::TopK => "router_topk: k must be within 1..=8",
            RouterRule::SigmoidNeedsIndirectScatter => {
                "router_topk: act_fn SIGMOID without router_pre_norm requires use_indirect_dma_scatter=True"
            }
            RouterRule::IndirectScatterTokens => {
                "router_topk: with use_indirect_dma_scatter a program's tokens must be <= 128 or a multiple of 128"
            }
            RouterRule::EagerTokens => "router_topk: return_eager_affi without router_pre_norm needs T <= 128",
            RouterRule::Sharding => "router_topk: shard_on_tokens needs several programs and at least one token each",
        }
    }
}

/// The shape and flags of one `router_topk` call, for [`router_topk_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterShape {
    /// Tokens `T`.
    pub t: i64,
    /// Hidden size `H`.
    pub h: i64,
    /// Experts `E`.
    pub e: i64,
    /// Experts selected per token.
    pub k: i64,
    /// `act_fn`.
    pub act_fn: RouterActFnType,
    /// `x_hbm_layout`.
    pub x_hbm_layout: i64,
    /// `x_sb_layout`.
    pub x_sb_layout: i64,
    /// `router_pre_norm`.
    pub router_pre_norm: bool,
    /// `use_indirect_dma_scatter`.
    pub use_indirect_dma_scatter: bool,
    /// `return_eager_affi`.
    pub return_eager_affi: bool,
    /// LNC programs sharing the tokens (1 without `shard_on_tokens`).
    pub programs: i64,
}

/// The first library rule a call breaks, or `None`.
pub const fn router_topk_violation(c: RouterShape) -> Option<RouterRule> {
    if c.x_hbm_layout != X_HBM_LAYOUT_H_T && c.x_hbm_layout != X_HBM_LAYOUT_T_H {
        return Some(RouterRule::XHbmLayout);
    }
    if c.x_sb_layout < 0 || c.x_sb_layout > 2 {
        return Some(RouterRule::XSbLayout);
    }
    if c.t < 1 {
        return Some(RouterRule::Tokens);
    }
    if c.h < P_MAX || c.h % P_MAX != 0 {
        return Some(RouterRule::Hidden);
    }
    if c.e < TOP8 || c.e > F_MAX {
        return Some(RouterRule::Experts);
    }
    if c.k < 1 || c.k > TOP8 {
        return Some(RouterRule::TopK);
    }
    if matches!(c.act_fn, RouterActFnType::SIGMOID) && !c.router_pre_norm && !c.use_indirect_dma_scatter {
        return Some(RouterRule::SigmoidNeedsIndirectScatter);
    }
    if c.return_eager_affi && !c.router_pre_norm && c.t > PE_COLUMN_TILE_128 {
        return Some(RouterRule::EagerTokens);
    }
    if c.programs < 1 || c.t < c.programs {
        return Some(RouterRule::Sharding);
    }
    // The first shard (every program's but the last) and the last one.
    let first = c.t / c.programs;
    let last = c.t - first * (c.programs - 1);
    if c.use_indirect_dma_scatter && (!indirect_scatter_fits(first) || !indirect_scatter_fits(last)) {
        return Some(RouterRule::IndirectScatterTokens);
    }
    None
}

/// Whether the indirect-DMA scatter takes a program's `t_local` tokens: at most
/// 128, or whole tiles of 128.
const fn indirect_scatter_fits(t_local: i64) -> bool {
    t_local <= PE_COLUMN_TILE_128 || t_local % PE_COLUMN_TILE_128 == 0
}

/// A `router_topk` call checked at compile time: the [`RouterShape`] of the
/// given fields (`act_fn` a [`RouterActFnType`] member's name, the flags
/// defaulting as in the library, `programs` to 1), or a compile error naming
/// the rule it breaks.
///
/// ```
/// let c = nkilib::router_topk_config!(t = 128, h = 4096, e = 128, k = 8, act_fn = SOFTMAX);
/// assert_eq!((c.t, c.e, c.k), (128, 128, 8));
/// let c = nkilib::router_topk_config!(
///     t = 256, h = 2048, e = 64, k = 2, act_fn = SIGMOID, use_indirect_dma_scatter = true, programs = 2
/// );
/// assert_eq!(c.programs, 2);
/// ```
///
/// ```compile_fail
/// // SIGMOID after the top-k needs the indirect-DMA scatter.
/// let c = nkilib::router_topk_config!(t = 128, h = 4096, e = 128, k = 8, act_fn = SIGMOID, router_pre_norm = false);
/// ```
///
/// ```compile_fail
/// // At most 8 experts per token.
/// let c = nkilib::router_topk_config!(t = 128, h = 4096, e = 128, k = 9, act_fn = SOFTMAX);
/// ```
#[macro_export]
macro_rules! router_topk_config {
    (t = $t:expr, h = $h:expr, e = $e:expr, k = $k:expr, act_fn = $act:ident $(, $field:ident = $value:expr)* $(,)?) => {{
        const CALL: $crate::router_topk::router_topk::RouterShape = $crate::router_topk::router_topk::RouterShape {
            $($field: $value,)*
            ..$crate::router_topk::router_topk::RouterShape {
                t: $t,
                h: $h,
                e: $e,
                k: $k,
                act_fn: $crate::router_topk::router_topk::RouterActFnType::$act,
                x_hbm_layout: $crate::router_topk::router_topk::X_HBM_LAYOUT_H_T,
                x_sb_layout: 0,
                router_pre_norm: true,
                use_indirect_dma_scatter: false,
                return_eager_affi: false,
                programs: 1,
            }
        };
        const _: () = if let Some(rule) = $crate::router_topk::router_topk::router_topk_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel with its constants and phase helpers.
#[nki_module]
pub mod kernel {
    pub use crate::utils::common_types::RouterActFnType;
    use nki::prelude::*;

    /// Partitions: hidden rows contracted per matmul, tokens per tile.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// The most experts: one matmul's moving free size (`gemm_moving_fmax`).
    pub const F_MAX: i64 = nl::tile_size::gemm_moving_fmax;
    /// Tokens per tile (the free size of a stationary `x` tile).
    pub const ST_F_MAX: i64 = 128;
    /// Values `max8` and `nc_find_index8` return per token: the most experts `k`
    /// may select, and the fewest experts they search.
    pub const TOP8: i64 = 8;
    /// PE column tile for at most 32 tokens (`use_column_tiling`).
    pub const PE_COLUMN_TILE_32: i64 = 32;
    /// PE column tile for at most 64 tokens.
    pub const PE_COLUMN_TILE_64: i64 = 64;
    /// The whole PE array: no column tiling.
    pub const PE_COLUMN_TILE_128: i64 = 128;
    /// `x_hbm_layout`: `x` is `[H, T]`.
    pub const X_HBM_LAYOUT_H_T: i64 = 0;
    /// `x_hbm_layout`: `x` is `[T, H]`.
    pub const X_HBM_LAYOUT_T_H: i64 = 1;
    /// The library's `XSBLayout_tp102__0`: hidden row `p·(H/128) + j` on partition `p`
    /// of hidden tile `j` (what a `[T, H]` `x` loads into).
    pub const XSB_LAYOUT_TP102: i64 = 0;
    /// The library's `XSBLayout_tp2013__1`: each half of `H` as `XSB_LAYOUT_TP102`,
    /// hidden row `half·H/2 + p·(H/256) + jj` for tile `j = half·(H/256) + jj`.
    pub const XSB_LAYOUT_TP2013: i64 = 1;
    /// The library's `XSBLayout_tp201__2`: hidden row `j·128 + p` (consecutive rows).
    pub const XSB_LAYOUT_TP201: i64 = 2;
    /// The library's `XSBLayout__128_Hdiv128_T__3`: the rows of `XSB_LAYOUT_TP201`,
    /// tokens innermost (what an `[H, T]` `x` loads into).
    pub const XSB_LAYOUT_HDIV128_T: i64 = 3;

    /// The activation of each row of `src` (`[t, n]`, fp32) into `dst`: sigmoid,
    /// or softmax along the row. For softmax, `negmax` (`[t, 1]`) receives the
    /// negated row max and `inv_sum` the reciprocal of `Σ exp(v - max)`; with
    /// `complete` false only those two are computed (the one-hot ACT2 path
    /// applies them to all experts later).
    #[nki_helper]
    pub fn compute_activation(dst: Sbuf, src: Sbuf, act_fn: RouterActFnType, negmax: Sbuf, inv_sum: Sbuf, complete: bool) {
        match act_fn {
            RouterActFnType::SIGMOID => nisa::activation(dst, nl::sigmoid, src),
            RouterActFnType::SOFTMAX => {
                let [t, n] = src.shape();
                nisa::tensor_reduce(negmax, nl::maximum, src, 1, negate = true);
                let exps = nl::ndarray([t, n], nl::float32, buffer = nl::sbuf);
                nisa::activation(
                    exps,
                    nl::exp,
                    src,
                    bias = negmax,
                    reduce_op = nl::add,
                    reduce_res = inv_sum,
                    reduce_cmd = nisa::reduce_cmd::reset_reduce,
                );
                nisa::reciprocal(inv_sum, inv_sum);
                if complete {
                    nisa::tensor_scalar(dst, exps, nl::multiply, inv_sum);
                }
            }
        }
    }

    /// The call's HBM tensors: the inputs and the outputs the caller passes.
    #[nki_object]
    pub struct RouterTensors {
        /// Tokens, `[H, T]` or `[T, H]` by `x_hbm_layout`.
        pub x: Hbm,
        /// Router weights, `[H, E]`.
        pub w: Hbm,
        /// Router bias, `[E]` or `[1, E]`.
        pub w_bias: Option<Hbm>,
        /// Logits out, `[T, E]`.
        pub router_logits: Hbm,
        /// Affinities out, `[T, E]`.
        pub expert_affinities: Hbm,
        /// Selected experts out, `[T, k]`.
        #[dtypes(uint32, int32)]
        pub expert_index: Hbm,
    }

    /// The kernel's flags (its keyword options).
    #[nki_object]
    pub struct RouterFlags {
        /// Activation before the top-k.
        #[default(true)]
        pub router_pre_norm: bool,
        /// Renormalise the selected affinities (with `router_pre_norm`).
        #[default(false)]
        pub norm_topk_prob: bool,
        /// PE column tiles sized to the tokens.
        #[default(false)]
        pub use_column_tiling: bool,
        /// Scatter the selected affinities by indirect DMA.
        #[default(false)]
        pub use_indirect_dma_scatter: bool,
        /// Also return the `[T, k]` selected affinities.
        #[default(false)]
        pub return_eager_affi: bool,
        /// Broadcast the bias by a ones-vector matmul.
        #[default(false)]
        pub use_PE_broadcast_w_bias: bool,
        /// Share the tokens between the programs.
        #[default(false)]
        pub shard_on_tokens: bool,
        /// Leave `expert_index` unwritten.
        #[default(false)]
        pub skip_store_expert_index: bool,
        /// Leave `router_logits` unwritten.
        #[default(false)]
        pub skip_store_router_logits: bool,
    }

    /// The shapes, this program's token share and the flags of one call.
    #[nki_object]
    pub struct RouterConfig {
        /// Tokens.
        pub t: i64,
        /// Experts.
        pub e: i64,
        /// Experts selected per token.
        pub k: i64,
        /// The activation over the experts.
        pub act_fn: RouterActFnType,
        /// `x`'s HBM layout (`X_HBM_LAYOUT_H_T` or `X_HBM_LAYOUT_T_H`).
        pub x_hbm_layout: i64,
        /// Which hidden row each partition of a hidden tile holds (`XSB_LAYOUT_*`):
        /// the order the matmul adds the rows in.
        pub x_sb_layout: i64,
        /// This program's tokens.
        pub t_local: i64,
        /// This program's first token.
        pub t_offset: i64,
        /// Hidden tiles of `P_MAX` rows.
        pub num_h_tiles: i64,
        /// Token tiles of at most `ST_F_MAX` tokens.
        pub num_t_tiles: i64,
        /// Partitions of the token-tiled SBUF tensors.
        pub t_p_dim: i64,
        /// The kernel's flags.
        pub flags: RouterFlags,
    }

    /// The token-tiled fp32 SBUF state the phases pass on, `[t_p_dim, num_t_tiles, ·]`.
    #[nki_object]
    pub struct RouterBuffers {
        /// Router logits, `[.., E]`.
        pub logits_sb: Tensor,
        /// Activations over all experts (ACT1) or the scatter's staging, `[.., E]`.
        pub affinities_full: Tensor,
        /// Negated row max of the ACT1 softmax, `[.., 1]`.
        pub row_negmax: Tensor,
        /// Reciprocal row sum of the ACT1 softmax, `[.., 1]`.
        pub row_inv_sum: Tensor,
        /// The `k` best scores, `[.., k]`.
        pub topk_vals: Tensor,
        /// Their experts, uint32, `[.., k]`.
        pub topk_idx: Tensor,
        /// Their experts as fp32, for comparisons, `[.., k]`.
        pub topk_idx_f32: Tensor,
        /// The selected experts' affinities, `[.., k]`.
        pub topk_aff: Tensor,
        /// Negated max of the selected logits (ACT2 softmax), `[.., 1]`.
        pub topk_negmax: Tensor,
        /// Reciprocal sum of the selected activations, `[.., 1]`.
        pub topk_inv_sum: Tensor,
    }

    /// The library's rules on the arguments (see `router_topk_violation`), checked
    /// when the kernel is traced.
    #[nki_helper]
    pub fn check_router_inputs(
        io: RouterTensors,
        act_fn: RouterActFnType,
        k: i64,
        x_hbm_layout: i64,
        x_sb_layout: i64,
        router_pre_norm: bool,
        use_indirect_dma_scatter: bool,
        return_eager_affi: bool,
    ) {
        let (x, w) = (io.x, io.w);
        assert!(
            x_hbm_layout == X_HBM_LAYOUT_H_T || x_hbm_layout == X_HBM_LAYOUT_T_H,
            "router_topk: x_hbm_layout must be 0 ([H, T]) or 1 ([T, H]), got {x_hbm_layout}"
        );
        assert!(x_sb_layout >= 0 && x_sb_layout <= 2, "router_topk: x_sb_layout must be 0, 1 or 2, got {x_sb_layout}");
        let (w_dims, x_dims) = (w.ndim(), x.ndim());
        assert!(w_dims == 2, "router_topk: w must be [H, E], got {w_dims} dims");
        assert!(x_dims == 2, "router_topk: x in HBM must be 2-D, got {x_dims} dims");
        let [h, e] = w.shape();
        let xs = x.shape();
        let x_h = if x_hbm_layout == X_HBM_LAYOUT_H_T { xs[0] } else { xs[1] };
        let t = if x_hbm_layout == X_HBM_LAYOUT_H_T { xs[1] } else { xs[0] };
        assert!(x_h == h, "router_topk: x has H = {x_h} (x_hbm_layout = {x_hbm_layout}) but w has H = {h}");
        assert!(t >= 1, "router_topk: x must hold at least one token, got T = {t}");
        assert!(h % P_MAX == 0, "router_topk: w: H = {h} must be a multiple of {P_MAX}");
        assert!(e >= TOP8 && e <= F_MAX, "router_topk: w: E = {e} must be within 8..=512");
        assert!(k >= 1 && k <= TOP8, "router_topk: k must be within 1..=8, got {k}");
        let (x_dtype, w_dtype) = (x.dtype(), w.dtype());
        assert!(x_dtype == w_dtype, "router_topk: x dtype {x_dtype} must match w dtype {w_dtype}");
        assert!(
            act_fn != RouterActFnType::SIGMOID || router_pre_norm || use_indirect_dma_scatter,
            "router_topk: act_fn SIGMOID without router_pre_norm requires use_indirect_dma_scatter=True"
        );
        assert!(
            !return_eager_affi || router_pre_norm || t <= PE_COLUMN_TILE_128,
            "router_topk: return_eager_affi without router_pre_norm needs T <= 128, got T = {t}"
        );
        let (router_logits, expert_affinities, expert_index) = (io.router_logits, io.expert_affinities, io.expert_index);
        let rl = router_logits.shape();
        assert!(router_logits.ndim() == 2 && rl[0] == t && rl[1] == e, "router_topk: router_logits must be [T, E] = [{t}, {e}]");
        let ea = expert_affinities.shape();
        assert!(expert_affinities.ndim() == 2 && ea[0] == t && ea[1] == e, "router_topk: expert_affinities must be [T, E] = [{t}, {e}]");
        let ei = expert_index.shape();
        assert!(expert_index.ndim() == 2 && ei[0] == t && ei[1] == k, "router_topk: expert_index must be [T, k] = [{t}, {k}]");
    }

    /// The token-tiled SBUF state of one call, `[t_p_dim, num_t_tiles, ·]`.
    #[nki_helper]
    fn allocate_router_buffers(cfg: RouterConfig) -> RouterBuffers {
        let (p, n, e, k) = (cfg.t_p_dim, cfg.num_t_tiles, cfg.e, cfg.k);
        RouterBuffers {
            logits_sb: nl::ndarray([p, n, e], nl::float32, buffer = nl::sbuf),
            affinities_full: nl::ndarray([p, n, e], nl::float32, buffer = nl::sbuf),
            row_negmax: nl::ndarray([p, n, 1], nl::float32, buffer = nl::sbuf),
            row_inv_sum: nl::ndarray([p, n, 1], nl::float32, buffer = nl::sbuf),
            topk_vals: nl::ndarray([p, n, k], nl::float32, buffer = nl::sbuf),
            topk_idx: nl::ndarray([p, n, k], nl::uint32, buffer = nl::sbuf),
            topk_idx_f32: nl::ndarray([p, n, k], nl::float32, buffer = nl::sbuf),
            topk_aff: nl::ndarray([p, n, k], nl::float32, buffer = nl::sbuf),
            topk_negmax: nl::ndarray([p, n, 1], nl::float32, buffer = nl::sbuf),
            topk_inv_sum: nl::ndarray([p, n, 1], nl::float32, buffer = nl::sbuf),
        }
    }

    /// The library's `router_topk_input_x_load`: this program's tokens with the
    /// hidden rows on the partitions, `[P_MAX, num_h_tiles, t_local]`, each
    /// partition of hidden tile `j` holding the row `cfg.x_sb_layout` names.
    #[nki_helper]
    fn router_topk_input_x_load(cfg: RouterConfig, io: RouterTensors) -> Sbuf {
        let (x, nh, t0, tl) = (io.x, cfg.num_h_tiles, cfg.t_offset, cfg.t_local);
        let x_sb = nl::ndarray([P_MAX, nh, tl], x.dtype(), buffer = nl::sbuf);
        if cfg.x_hbm_layout == X_HBM_LAYOUT_H_T {
            nisa::dma_copy(x_sb, x.reshape_dim(0, [nh, P_MAX]).permute([1, 0, 2])[s![.., .., t0..t0 + tl]]);
        } else if cfg.x_sb_layout == XSB_LAYOUT_TP2013 {
            let halves = x.reshape_dim(1, [2, P_MAX, nh / 2]).permute([2, 1, 3, 0]);
            nisa::dma_copy(x_sb.reshape([P_MAX, 2, nh / 2, tl]), halves[s![.., .., .., t0..t0 + tl]]);
        } else if cfg.x_sb_layout == XSB_LAYOUT_TP201 {
            nisa::dma_copy(x_sb, x.reshape_dim(1, [nh, P_MAX]).permute([2, 1, 0])[s![.., .., t0..t0 + tl]]);
        } else {
            nisa::dma_copy(x_sb, x.reshape_dim(1, [P_MAX, nh]).permute([1, 2, 0])[s![.., .., t0..t0 + tl]]);
        }
        x_sb
    }

    /// The library's `router_topk_input_w_load`: `w` as `[P_MAX, num_h_tiles, E]`, its
    /// hidden rows split over the partitions as `x`'s are (`cfg.x_sb_layout`).
    #[nki_helper]
    fn router_topk_input_w_load(cfg: RouterConfig, io: RouterTensors) -> Sbuf {
        let (w, nh, e) = (io.w, cfg.num_h_tiles, cfg.e);
        let w_sb = nl::ndarray([P_MAX, nh, e], w.dtype(), buffer = nl::sbuf);
        if cfg.x_sb_layout == XSB_LAYOUT_TP102 {
            nisa::dma_copy(w_sb, w.reshape([P_MAX, nh, e]));
        } else if cfg.x_sb_layout == XSB_LAYOUT_TP2013 {
            nisa::dma_copy(w_sb.reshape([P_MAX, 2, nh / 2, e]), w.reshape_dim(0, [2, P_MAX, nh / 2]).permute([1, 0, 2, 3]));
        } else {
            nisa::dma_copy(w_sb, w.reshape_dim(0, [nh, P_MAX]).permute([1, 0, 2]));
        }
        w_sb
    }

    /// The bias in fp32, repeated on the partitions of one token tile: by a
    /// broadcast DMA, or with `use_PE_broadcast_w_bias` by a ones-vector matmul.
    #[nki_helper]
    fn broadcast_w_bias(cfg: RouterConfig, io: RouterTensors) -> Sbuf {
        let (e, bias_rows) = (cfg.e, cfg.t_local.min(ST_F_MAX));
        let bias_bc = nl::ndarray([bias_rows, e], nl::float32, buffer = nl::sbuf);
        let w_bias = io.w_bias;
        if let Some(b) = w_bias {
            let bias_flat = b.reshape([1, e]);
            if cfg.flags.use_PE_broadcast_w_bias {
                let bias_row = nl::ndarray([1, e], nl::float32, buffer = nl::sbuf);
                nisa::dma_copy(bias_row, bias_flat);
                let ones = nl::ndarray([1, bias_rows], nl::float32, buffer = nl::sbuf);
                nisa::memset(ones, 1.0);
                let bias_psum = nl::ndarray([bias_rows, e], nl::float32, buffer = nl::psum);
                nisa::nc_matmul(bias_psum, ones, bias_row, is_stationary_onezero = true);
                nisa::tensor_copy(bias_bc, bias_psum);
            } else {
                nisa::dma_copy(bias_bc, bias_flat.broadcast(0, bias_rows));
            }
        }
        bias_bc
    }

    /// The router logits `x @ w (+ bias)` per token tile into `logits_sb`, stored to
    /// `router_logits`. With PE column tiling a small token tile uses a 32- or
    /// 64-column slice of the array, successive hidden tiles landing in successive
    /// slices, whose partial sums are added up.
    #[nki_helper]
    fn compute_router_logits(cfg: RouterConfig, io: RouterTensors, bufs: RouterBuffers, x_sb: Sbuf, w_sb: Sbuf, bias_bc: Sbuf) {
        let (t_local, num_h_tiles) = (cfg.t_local, cfg.num_h_tiles);
        let column_tile = if !cfg.flags.use_column_tiling || t_local > PE_COLUMN_TILE_64 {
            PE_COLUMN_TILE_128
        } else if t_local > PE_COLUMN_TILE_32 {
            PE_COLUMN_TILE_64
        } else {
            PE_COLUMN_TILE_32
        };
        let num_column_tiles = PE_COLUMN_TILE_128 / column_tile;
        for ti in 0..cfg.num_t_tiles {
            let t0 = ti * ST_F_MAX;
            let tt = (t_local - t0).min(ST_F_MAX);
            let psum = nl::ndarray([P_MAX, cfg.e], nl::float32, buffer = nl::psum);
            for hi in 0..num_h_tiles {
                let x_tile = x_sb[s![.., hi, t0..t0 + tt]];
                if num_column_tiles == 1 {
                    nisa::nc_matmul(psum[s![0..tt, ..]], x_tile, w_sb[s![.., hi, ..]]);
                } else {
                    let c0 = (hi % num_column_tiles) * column_tile;
                    let (pos, size) = ((0, c0), (P_MAX, column_tile));
                    nisa::nc_matmul(psum[s![c0..c0 + tt, ..]], x_tile, w_sb[s![.., hi, ..]], tile_position = pos, tile_size = size);
                }
            }
            let dst = bufs.logits_sb[s![0..tt, ti, ..]];
            if io.w_bias.is_some() {
                nisa::tensor_tensor(dst, psum[s![0..tt, ..]], bias_bc[s![0..tt, ..]], nl::add);
            } else {
                nisa::tensor_copy(dst, psum[s![0..tt, ..]]);
            }
            // The other column tiles' partial sums (those some hidden tile reached).
            for c in 1..num_column_tiles.min(num_h_tiles) {
                let c0 = c * column_tile;
                nisa::tensor_tensor(dst, dst, psum[s![c0..c0 + tt, ..]], nl::add);
            }
            if !cfg.flags.skip_store_router_logits {
                let r0 = cfg.t_offset + t0;
                nisa::dma_copy(io.router_logits[s![r0..r0 + tt, ..]], dst);
            }
        }
    }

    /// ACT1 (`router_pre_norm`): the activation over all experts into
    /// `affinities_full`, stored as `expert_affinities` when nothing is scattered.
    #[nki_helper]
    fn compute_act1(cfg: RouterConfig, io: RouterTensors, bufs: RouterBuffers, scatter: bool) {
        for ti in 0..cfg.num_t_tiles {
            let t0 = ti * ST_F_MAX;
            let tt = (cfg.t_local - t0).min(ST_F_MAX);
            let full = bufs.affinities_full[s![0..tt, ti, ..]];
            let (negmax, inv_sum) = (bufs.row_negmax[s![0..tt, ti, ..]], bufs.row_inv_sum[s![0..tt, ti, ..]]);
            compute_activation(full, bufs.logits_sb[s![0..tt, ti, ..]], cfg.act_fn, negmax, inv_sum, true);
            if !scatter {
                let r0 = cfg.t_offset + t0;
                nisa::dma_copy(io.expert_affinities[s![r0..r0 + tt, ..]], full);
            }
        }
    }

    /// topK: the 8 best scores of each token (activations with ACT1, else logits)
    /// and their experts, the first `k` of each kept and stored to `expert_index`.
    #[nki_helper]
    fn select_topk(cfg: RouterConfig, io: RouterTensors, bufs: RouterBuffers) {
        let k = cfg.k;
        for ti in 0..cfg.num_t_tiles {
            let t0 = ti * ST_F_MAX;
            let tt = (cfg.t_local - t0).min(ST_F_MAX);
            let scores =
                if cfg.flags.router_pre_norm { bufs.affinities_full[s![0..tt, ti, ..]] } else { bufs.logits_sb[s![0..tt, ti, ..]] };
            let top8 = nl::ndarray([tt, TOP8], nl::float32, buffer = nl::sbuf);
            nisa::max8(top8, scores);
            nisa::tensor_copy(bufs.topk_vals[s![0..tt, ti, ..]], top8[s![.., 0..k]]);
            let idx8 = nl::ndarray([tt, TOP8], nl::uint32, buffer = nl::sbuf);
            nisa::nc_find_index8(idx8, scores, top8);
            let idx = bufs.topk_idx[s![0..tt, ti, ..]];
            nisa::tensor_copy(idx, idx8[s![.., 0..k]]);
            nisa::tensor_copy(bufs.topk_idx_f32[s![0..tt, ti, ..]], idx);
            if !cfg.flags.skip_store_expert_index {
                let r0 = cfg.t_offset + t0;
                nisa::dma_copy(io.expert_index[s![r0..r0 + tt, ..]], idx);
            }
        }
    }

    /// ACT2 (the activation of the selected logits; complete when the selected
    /// affinities themselves are needed, else only the one-hot softmax's
    /// statistics) or Norm (the selected activations over their sum) into `topk_aff`.
    #[nki_helper]
    fn compute_topk_affinities(cfg: RouterConfig, bufs: RouterBuffers, norm: bool) {
        for ti in 0..cfg.num_t_tiles {
            let t0 = ti * ST_F_MAX;
            let tt = (cfg.t_local - t0).min(ST_F_MAX);
            let vals = bufs.topk_vals[s![0..tt, ti, ..]];
            let aff = bufs.topk_aff[s![0..tt, ti, ..]];
            let inv = bufs.topk_inv_sum[s![0..tt, ti, ..]];
            if !cfg.flags.router_pre_norm {
                let complete = cfg.flags.return_eager_affi || cfg.flags.use_indirect_dma_scatter;
                compute_activation(aff, vals, cfg.act_fn, bufs.topk_negmax[s![0..tt, ti, ..]], inv, complete);
            } else if norm {
                nisa::tensor_reduce(inv, nl::add, vals, 1);
                nisa::reciprocal(inv, inv);
                nisa::tensor_scalar(aff, vals, nl::multiply, inv);
            } else {
                nisa::tensor_copy(aff, vals);
            }
        }
    }

    /// The one-hot scatter: a mask of each token's selected experts times the
    /// affinities over all experts — with ACT2 `exp(logit - max of the selected) /
    /// (their sum)`, so the mask leaves exactly the top-k softmax.
    #[nki_helper]
    fn scatter_one_hot(cfg: RouterConfig, io: RouterTensors, bufs: RouterBuffers) {
        let e = cfg.e;
        // The expert number of every column, compared with each selected index.
        let expert_ids = nl::ndarray([cfg.t_p_dim, e], nl::uint32, buffer = nl::sbuf);
        nisa::iota(expert_ids, [[1, e]], offset = 0, channel_multiplier = 0);
        for ti in 0..cfg.num_t_tiles {
            let t0 = ti * ST_F_MAX;
            let tt = (cfg.t_local - t0).min(ST_F_MAX);
            let mask = nl::ndarray([tt, e], nl::float32, buffer = nl::sbuf);
            nisa::memset(mask, 0.0);
            let hit = nl::ndarray([tt, e], nl::float32, buffer = nl::sbuf);
            for j in 0..cfg.k {
                nisa::tensor_scalar(hit, expert_ids[s![0..tt, ..]], nl::equal, bufs.topk_idx_f32[s![0..tt, ti, j..j + 1]]);
                nisa::tensor_tensor(mask, mask, hit, nl::add);
            }
            let full = bufs.affinities_full[s![0..tt, ti, ..]];
            let inv = bufs.topk_inv_sum[s![0..tt, ti, ..]];
            if !cfg.flags.router_pre_norm {
                nisa::activation(full, nl::exp, bufs.logits_sb[s![0..tt, ti, ..]], bias = bufs.topk_negmax[s![0..tt, ti, ..]]);
                nisa::tensor_scalar(full, full, nl::multiply, inv);
            } else {
                nisa::tensor_scalar(full, full, nl::multiply, inv);
            }
            let scattered = nl::ndarray([tt, e], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(scattered, mask, full, nl::multiply);
            let r0 = cfg.t_offset + t0;
            nisa::dma_copy(io.expert_affinities[s![r0..r0 + tt, ..]], scattered);
        }
    }

    /// The indirect-DMA scatter: each token's rows zeroed, then each selected
    /// affinity written to the flat offset `t·E + idx` of `expert_affinities`.
    #[nki_helper]
    fn scatter_indirect(cfg: RouterConfig, io: RouterTensors, bufs: RouterBuffers) {
        let (e, k) = (cfg.e, cfg.k);
        let expert_affinities = io.expert_affinities;
        let zeros = nl::ndarray([cfg.t_p_dim, e], io.x.dtype(), buffer = nl::sbuf);
        nisa::memset(zeros, 0.0);
        let flat = expert_affinities.reshape([cfg.t * e]);
        for ti in 0..cfg.num_t_tiles {
            let t0 = ti * ST_F_MAX;
            let tt = (cfg.t_local - t0).min(ST_F_MAX);
            let r0 = cfg.t_offset + t0;
            nisa::dma_copy(expert_affinities[s![r0..r0 + tt, ..]], zeros[s![0..tt, ..]]);
            // Each token's flat row offset (t·E), added to its selected experts.
            let row_offset = nl::ndarray([tt, 1], nl::float32, buffer = nl::sbuf);
            nisa::iota(row_offset, [[1, 1]], offset = r0 * e, channel_multiplier = e);
            let flat_idx = nl::ndarray([tt, k], nl::uint32, buffer = nl::sbuf);
            nisa::tensor_scalar(flat_idx, bufs.topk_idx[s![0..tt, ti, ..]], nl::add, row_offset);
            for j in 0..k {
                nisa::dma_copy(
                    flat.ap([[1, tt], [1, 1]], vector_offset = flat_idx[s![.., j..j + 1]], indirect_dim = 0),
                    bufs.topk_aff[s![0..tt, ti, j..j + 1]],
                );
            }
        }
    }

    /// This program's configuration: the sizes of `io`, the token shard
    /// (every program but the last takes `T / programs` tokens, rounded down,
    /// the last the rest), the flags and the SBUF layout `x` is held in
    /// (`x_sb_layout`, which the library's caller chooses for an `x` it keeps
    /// in SBUF, and for an HBM `x` the one it loads into).
    #[nki_helper]
    pub fn router_topk_config(
        io: RouterTensors,
        act_fn: RouterActFnType,
        k: i64,
        x_hbm_layout: i64,
        x_sb_layout: i64,
        f: RouterFlags,
    ) -> RouterConfig {
        let [h, e] = io.w.shape();
        let xs = io.x.shape();
        let t = if x_hbm_layout == X_HBM_LAYOUT_H_T { xs[1] } else { xs[0] };
        let shard_on_tokens = f.shard_on_tokens;
        let use_indirect_dma_scatter = f.use_indirect_dma_scatter;
        // Token sharding: every program but the last takes T / programs tokens
        // (rounded down), the last the rest.
        let grid = shard_on_tokens && nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        assert!(!shard_on_tokens || programs > 1, "router_topk: shard_on_tokens needs more than one program, got {programs}");
        assert!(t >= programs, "router_topk: shard_on_tokens needs at least one token per program, got T = {t} for {programs} programs");
        let program = if grid { nl::program_id(0) } else { 0 };
        let t_first = t / programs;
        let t_local = if program == programs - 1 { t - t_first * (programs - 1) } else { t_first };
        assert!(
            !use_indirect_dma_scatter || t_local <= PE_COLUMN_TILE_128 || t_local % PE_COLUMN_TILE_128 == 0,
            "router_topk: with use_indirect_dma_scatter a program's tokens ({t_local}) must be <= 128 or a multiple of 128"
        );
        let num_t_tiles = t_local.div_ceil(ST_F_MAX);
        RouterConfig {
            t,
            e,
            k,
            act_fn,
            x_hbm_layout,
            x_sb_layout,
            t_local,
            t_offset: program * t_first,
            num_h_tiles: h / P_MAX,
            num_t_tiles,
            t_p_dim: if num_t_tiles == 1 { t_local } else { P_MAX },
            flags: f,
        }
    }

    /// The router's pipeline on this program's tokens (module docs): the
    /// loads, the logits, the activation, the top-k and the scatter; returns
    /// the buffers holding the selected affinities.
    #[nki_helper]
    pub fn router_topk_pipeline(cfg: RouterConfig, io: RouterTensors) -> RouterBuffers {
        let x_sb: Sbuf = router_topk_input_x_load(cfg, io);
        let w_sb: Sbuf = router_topk_input_w_load(cfg, io);
        let bias_bc: Sbuf = broadcast_w_bias(cfg, io);
        let bufs: RouterBuffers = allocate_router_buffers(cfg);
        compute_router_logits(cfg, io, bufs, x_sb, w_sb, bias_bc);

        // The pipeline the flags select: ACT1 before the top-k or ACT2 after it,
        // Norm with ACT1, and a scatter of the selected affinities to [T, E].
        let norm = cfg.flags.router_pre_norm && cfg.flags.norm_topk_prob;
        let scatter = !cfg.flags.router_pre_norm || norm;
        if cfg.flags.router_pre_norm {
            compute_act1(cfg, io, bufs, scatter);
        }
        select_topk(cfg, io, bufs);
        compute_topk_affinities(cfg, bufs, norm);
        if scatter && !cfg.flags.use_indirect_dma_scatter {
            scatter_one_hot(cfg, io, bufs);
        }
        if scatter && cfg.flags.use_indirect_dma_scatter {
            scatter_indirect(cfg, io, bufs);
        }
        bufs
    }

    /// The router: `x @ w (+ w_bias)` into `router_logits` `[T, E]`, the `k`
    /// best experts of each token into `expert_index` `[T, k]`, their affinities
    /// into `expert_affinities` `[T, E]` (see the module docs for the pipeline
    /// the flags select). Returns `[router_logits, expert_index,
    /// expert_affinities]`, with the `[T, k]` float32 top-k affinities appended
    /// when `return_eager_affi`.
    #[nki_kernel]
    pub fn router_topk(
        #[spread] io: RouterTensors,
        act_fn: RouterActFnType,
        k: i64,
        x_hbm_layout: i64,
        x_sb_layout: i64,
        #[spread] flags: RouterFlags,
    ) -> Outputs {
        check_router_inputs(io, act_fn, k, x_hbm_layout, x_sb_layout, router_pre_norm, use_indirect_dma_scatter, return_eager_affi);
        // An HBM `x` is loaded into the layout the library loads it into,
        // whatever `x_sb_layout` says (that names the layout of an SBUF `x`).
        let load_layout = if x_hbm_layout == X_HBM_LAYOUT_H_T { XSB_LAYOUT_HDIV128_T } else { XSB_LAYOUT_TP102 };
        let cfg: RouterConfig = router_topk_config(io, act_fn, k, x_hbm_layout, load_layout, flags);
        let bufs: RouterBuffers = router_topk_pipeline(cfg, io);
        if return_eager_affi {
            let eager = nl::ndarray([cfg.t, k], nl::float32, buffer = nl::shared_hbm);
            for ti in 0..cfg.num_t_tiles {
                let t0 = ti * ST_F_MAX;
                let tt = (cfg.t_local - t0).min(ST_F_MAX);
                nisa::dma_copy(eager[s![cfg.t_offset + t0..cfg.t_offset + t0 + tt, ..]], bufs.topk_aff[s![0..tt, ti, ..]]);
            }
            return Outputs(router_logits, expert_index, expert_affinities, eager);
        }
        Outputs(router_logits, expert_index, expert_affinities)
    }
}
