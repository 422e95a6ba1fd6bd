//! The NKI library's `output_projection_cte`: the projection after a
//! context-encoding (prefill) attention block, `out = attention @ weight +
//! bias`, for long sequences, the sequence last in the input.
//!
//! `attention` is `[B, N, D, S]`, `weight` `[N·D, H]` (row `n·D + d`), `bias`
//! `[1, H]`; `out[b, s, h] = Σ_{n,d} attention[b, n, d, s] · weight[n·D + d,
//! h] (+ bias[0, h])`, `[B, S, H]`.
//!
//! ```text
//! H split over the LNC programs: program p owns columns p·H/LNC .. (p+1)·H/LNC
//! head packing: G heads (the most dividing N with G·D <= 128) share the
//!     partitions, N' = N / G heads of D' = G·D rows ([B, N', D', S] is a reshape)
//! the program's columns in blocks of H_BLOCK (all of them when the weights
//! fit in MAX_WEIGHT_SBUF_BYTES, else multiples of F_MAX):
//!     w = weight block          [D', N', H_BLOCK]     (load_float_weights)
//!     bias = broadcast on P_MAX rows                  (load_bias)
//!     for each batch b, each S_TILE (512) of the sequence:    (process_batch_tile)
//!         a = attention[b, :, :, tile]  [D', N', S_TILE]  in the weight dtype
//!         STATIC: a = clip(a / input_scale, ±240) in float8_e4m3
//!         for each P_MAX (128) rows of the tile, each F_MAX (512) columns:
//!             psum[s, h] = Σ_n' a[:, n', s]ᵀ @ w[:, n', h]      # the tokens stationary
//!             res[s, h]  = dequant(psum) (+ bias)  in attention's dtype
//!         store res to out[b, rows, block]
//! ```
//!
//! `STATIC` quantization takes `float8_e4m3` weights and `[128, 1]` input and
//! weight scales: the activations are multiplied by the reciprocal input scale
//! (rounded to their dtype), clipped to `±240` and rounded to `float8_e4m3`;
//! the fp32 sums are multiplied by `weight_scale · input_scale`, rounded to
//! the attention dtype, and the bias added.
//!
//! The kernel takes the library's signature, `attention, weight, bias=None,
//! quantization_type=QuantizationType.NONE, input_scales=None,
//! weight_scales=None, output_dtype=None`, with the library's
//! [`QuantizationType`]. The output is in `output_dtype`, by default
//! `attention`'s (results are rounded to `attention`'s dtype, then stored).
//! `NONE`, `STATIC` and `MX` are implemented. `MX` (trn3) takes
//! `float4_e2m1fn_x4` weights `[N·D/4, H]` with `uint8` block scales
//! `weight_scales` `[N·D/32, H]`, and bfloat16 / float16 attention quantized
//! on chip, or `float8_e4m3fn_x4` attention `[B, 1, N·D/4, S]` quantized
//! offline with `input_scales` `[B, N·D/32, S]`; its output defaults to
//! bfloat16 (see [`output_projection_cte_mx`](super::output_projection_cte_mx)).
//! `STATIC_MX` (trn3) takes `float8_e4m3fn` weights `[N·D, H]`, stored
//! pre-shuffled four rows to a column, and `[128, 1]` scales as `STATIC`
//! does, and multiplies with `nc_matmul_mx` at a unit block scale (see
//! [`output_projection_cte_mx`](super::output_projection_cte_mx)); its output
//! defaults to `attention`'s dtype. `ROW`, which the library routes to its
//! float path, is refused. The library's double-row fp8 matmul (a NeuronCore-v3
//! speed-up of `STATIC`) is one matmul per head here: the same products,
//! summed in fp32. The rules are [`output_projection_cte_violation`]'s.

use nki::prelude::*;

pub use crate::utils::mx_layout::QUADRANT;
pub use kernel::*;
/// The generations the rules tell apart (MX needs trn3).
pub use nki::hw::Generation;

/// The shape of one `output_projection_cte` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputProjectionCteShape {
    /// Batch `B`.
    pub b: i64,
    /// Heads `N`.
    pub n: i64,
    /// Head dim `D`.
    pub d: i64,
    /// Sequence `S`.
    pub s: i64,
    /// Hidden size `H`.
    pub h: i64,
    /// LNC programs.
    pub programs: i64,
    /// Whether an MX form was asked for (`MX`, or `STATIC_MX`: both multiply
    /// with `nc_matmul_mx`).
    pub mx_quant: bool,
    /// `MX` with the attention given quantized (`float8_e4m3fn_x4`, `D` packed).
    pub prequantized: bool,
    /// The generation the kernel runs on.
    pub generation: Generation,
}

/// Why an `output_projection_cte` shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputProjectionCteRule {
    /// A dimension is not positive.
    Positive,
    /// `B · S` is above the validated 131072.
    Tokens,
    /// `D` is above 128.
    HeadDim,
    /// `H` is above the validated 20705.
    Hidden,
    /// `N` is above the validated 17.
    Heads,
    /// `H` does not split evenly over the LNC programs.
    HiddenShards,
    /// `MX` quantization off trn3 (`nc_matmul_mx` is NeuronCore-v4's).
    MxGeneration,
    /// `MX` with `N·D` not a positive multiple of 128 (32 given quantized).
    MxContraction,
}

impl OutputProjectionCteRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            OutputProjectionCteRule::Positive => "output_projection_cte: B, N, D, S, H and the LNC size must be positive",
            OutputProjectionCteRule::Tokens => "output_projection_cte: B * S must be at most 131072",
            OutputProjectionCteRule::HeadDim => "output_projection_cte: the head dim D must be at most 128",
            OutputProjectionCteRule::Hidden => "output_projection_cte: H must be at most 20705",
            OutputProjectionCteRule::Heads => "output_projection_cte: N must be at most 17",
            OutputProjectionCteRule::HiddenShards => "output_projection_cte: H must be a multiple of the LNC size",
            OutputProjectionCteRule::MxGeneration => "output_projection_cte: MX quantization needs trn3 (nc_matmul_mx)",
            OutputProjectionCteRule::MxContraction => {
                "output_projection_cte: MX quantization needs N * D to be a positive multiple of 128 (of 32 with pre-quantized input)"
            }
        }
    }
}

/// The first rule `shape` breaks.
pub const fn output_projection_cte_violation(shape: OutputProjectionCteShape) -> Option<OutputProjectionCteRule> {
    let OutputProjectionCteShape { b, n, d, s, h, programs, mx_quant, prequantized, generation } = shape;
    if b <= 0 || n <= 0 || d <= 0 || s <= 0 || h <= 0 || programs <= 0 {
        return Some(OutputProjectionCteRule::Positive);
    }
    if b * s > MAX_VALIDATED_B_TIMES_S_SIZE {
        return Some(OutputProjectionCteRule::Tokens);
    }
    if !mx_quant && d > P_MAX {
        return Some(OutputProjectionCteRule::HeadDim);
    }
    if h > MAX_VALIDATED_H_SIZE {
        return Some(OutputProjectionCteRule::Hidden);
    }
    if !mx_quant && n > MAX_VALIDATED_N_SIZE {
        return Some(OutputProjectionCteRule::Heads);
    }
    if h % programs != 0 {
        return Some(OutputProjectionCteRule::HiddenShards);
    }
    if mx_quant && !matches!(generation, Generation::Trn3) {
        return Some(OutputProjectionCteRule::MxGeneration);
    }
    let unit = if prequantized { QUADRANT } else { P_MAX };
    if mx_quant && (n * d) % unit != 0 {
        return Some(OutputProjectionCteRule::MxContraction);
    }
    None
}

/// An `output_projection_cte` shape checked at compile time, or a compile
/// error naming the rule it breaks.
///
/// ```
/// let shape = nkilib::output_projection_cte_config!(b = 1, n = 16, d = 64, s = 2048, h = 3072, programs = 2);
/// assert_eq!(shape.s, 2048);
/// ```
///
/// ```compile_fail
/// // N = 32 heads is above the validated 17.
/// let shape = nkilib::output_projection_cte_config!(b = 1, n = 32, d = 64, s = 2048, h = 3072, programs = 2);
/// ```
///
/// MX quantization takes any number of heads, on trn3 (the other fields
/// default to no MX on trn2):
///
/// ```
/// use nkilib::output_projection::output_projection_cte::output_projection_cte::Generation;
/// let shape = nkilib::output_projection_cte_config!(
///     b = 1, n = 32, d = 64, s = 2048, h = 3072, programs = 2, mx_quant = true, generation = Generation::Trn3
/// );
/// assert!(shape.mx_quant);
/// ```
#[macro_export]
macro_rules! output_projection_cte_config {
    (b = $b:expr,n = $n:expr,d = $d:expr,s = $s:expr,h = $h:expr,programs = $p:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const SHAPE: $crate::output_projection::output_projection_cte::output_projection_cte::OutputProjectionCteShape =
            $crate::output_projection::output_projection_cte::output_projection_cte::OutputProjectionCteShape {
                b: $b,
                n: $n,
                d: $d,
                s: $s,
                h: $h,
                programs: $p,
                $($field: $v,)*
                ..$crate::output_projection::output_projection_cte::output_projection_cte::OutputProjectionCteShape {
                    b: 0,
                    n: 0,
                    d: 0,
                    s: 0,
                    h: 0,
                    programs: 1,
                    mx_quant: false,
                    prequantized: false,
                    generation: $crate::output_projection::output_projection_cte::output_projection_cte::Generation::Trn2,
                }
            };
        const _: () = if let Some(rule) =
            $crate::output_projection::output_projection_cte::output_projection_cte::output_projection_cte_violation(SHAPE)
        {
            panic!("{}", rule.message());
        };
        SHAPE
    }};
}

/// The kernel, its tile constants, bundles and phase helpers.
#[nki_module]
pub mod kernel {
    use crate::output_projection::output_projection_cte::output_projection_cte_mx::{
        output_projection_cte_mx, output_projection_cte_static_mx, validate_mx_inputs, validate_static_mx_inputs,
    };
    pub use crate::output_projection::output_projection_cte::output_projection_cte_parameters::{
        H_ALIGNMENT, MAX_WEIGHT_SBUF_BYTES, S_TILE_SIZE, calculate_h_block_size, dtype_size, h_block_bounds, load_static_quant_scales,
    };
    use crate::output_projection::output_projection_utils::calculate_head_packing;
    pub use crate::output_projection::output_projection_utils::{F_MAX, FP8_MAX, P_MAX, QUANT_DTYPE};
    pub use crate::utils::common_types::QuantizationType;
    use crate::utils::kernel_helpers::check_hidden_row;
    use nki::prelude::*;

    /// The largest validated `B · S`.
    pub const MAX_VALIDATED_B_TIMES_S_SIZE: i64 = 131072;
    /// The largest validated `H`.
    pub const MAX_VALIDATED_H_SIZE: i64 = 20705;
    /// The largest validated `N`.
    pub const MAX_VALIDATED_N_SIZE: i64 = 17;

    /// The library's `TilingConfig`: the sizes after head packing, the
    /// program's columns and their blocks.
    #[nki_object]
    pub struct TilingConfig {
        /// LNC programs.
        pub num_prgs: i64,
        /// This program.
        pub prg_id: i64,
        /// `B`.
        pub b_size: i64,
        /// Packed heads `N' = N / G`.
        pub n_size: i64,
        /// Contraction rows per packed head `D' = G · D`.
        pub d_size: i64,
        /// `S`.
        pub s_size: i64,
        /// `H`.
        pub h_size: i64,
        /// Columns per program, `H / LNC`.
        pub h_sharded_size: i64,
        /// Columns per weight block.
        pub h_block_size: i64,
        /// Weight blocks per program.
        pub num_h_blocks_per_prg: i64,
        /// Heads per packed head `G`.
        pub group_size: i64,
        /// `STATIC` quantization.
        pub is_fp8_quantized: bool,
    }

    /// The tensors the phases read and write.
    #[nki_object]
    pub struct ProjectionTensors {
        /// `attention` seen as `[B, N', D', S]`.
        pub attention: Tensor,
        /// `weight` seen as `[N', D', H]`.
        pub weight: Tensor,
        /// `[1, H]`.
        pub bias: Option<Tensor>,
        /// `[B, S, H]`.
        pub out: Tensor,
        /// `STATIC`: `1 / input_scale` on each partition, `[128, 1]` fp32.
        pub inv_input_scale_sb: Tensor,
        /// `STATIC`: `weight_scale · input_scale` on each partition, `[128, 1]` fp32.
        pub weight_scale_sb: Tensor,
    }

    /// The library's `build_tiling_config`: head packing, and the program's
    /// `H / LNC` columns in one block (rounded up to `H_ALIGNMENT`) when the
    /// weights fit in `MAX_WEIGHT_SBUF_BYTES`, else in blocks of the most
    /// `F_MAX` multiples that fit.
    #[nki_helper]
    pub fn build_tiling_config(attention: Hbm, weight: Hbm, programs: i64, prg_id: i64, is_fp8_quantized: bool) -> TilingConfig {
        let [b, n0, d0, sl] = attention.shape();
        let h = weight.shape()[1];
        let (n, d, group_size): (i64, i64, i64) = calculate_head_packing(n0, d0, P_MAX);
        let h_sharded_size = h / programs;
        let h_block_size: i64 = calculate_h_block_size(n * d, h_sharded_size, dtype_size(weight.dtype()));
        TilingConfig {
            num_prgs: programs,
            prg_id,
            b_size: b,
            n_size: n,
            d_size: d,
            s_size: sl,
            h_size: h,
            h_sharded_size,
            h_block_size,
            num_h_blocks_per_prg: h_sharded_size.div_ceil(h_block_size),
            group_size,
            is_fp8_quantized,
        }
    }

    /// The library's `load_float_weights` (and `load_quantized_weights`):
    /// columns `h0..h0 + cols` of the packed weights, `[D', N', cols]`, one DMA per head.
    #[nki_helper]
    pub fn load_float_weights(cfg: TilingConfig, io: ProjectionTensors, h0: i64, cols: i64) -> Sbuf {
        let w_sb = nl::ndarray([cfg.d_size, cfg.n_size, cfg.h_block_size], io.weight.dtype(), buffer = nl::sbuf);
        for n in 0..cfg.n_size {
            nisa::dma_copy(w_sb[s![.., n..n + 1, 0..cols]], io.weight[s![n..n + 1, .., h0..h0 + cols]]);
        }
        w_sb
    }

    /// The library's `load_bias`: columns `h0..h0 + cols` of the bias on all
    /// `P_MAX` partitions (a broadcast DMA); an unused tile without a bias.
    #[nki_helper]
    pub fn load_bias(cfg: TilingConfig, io: ProjectionTensors, h0: i64, cols: i64) -> Sbuf {
        let bias = io.bias;
        let bias_sb = nl::ndarray([P_MAX, cfg.h_block_size], io.attention.dtype(), buffer = nl::sbuf);
        if let Some(bv) = bias {
            nisa::dma_copy(bias_sb[s![.., 0..cols]], bv[s![.., h0..h0 + cols]].broadcast(0, P_MAX));
        }
        bias_sb
    }

    /// The library's `load_input_tensor_float`: positions `s0..s0 + s_len` of
    /// batch `b`, `[D', N', S_TILE_SIZE]` in the weight dtype (`STATIC`:
    /// in `attention`'s, then quantized into `float8_e4m3`).
    #[nki_helper]
    pub fn load_input_tensor(cfg: TilingConfig, io: ProjectionTensors, b: i64, s0: i64, s_len: i64) -> Sbuf {
        let dtype = if cfg.is_fp8_quantized { io.attention.dtype() } else { io.weight.dtype() };
        let a_sb = nl::ndarray([cfg.d_size, cfg.n_size, S_TILE_SIZE], dtype, buffer = nl::sbuf);
        for n in 0..cfg.n_size {
            nisa::dma_copy(a_sb[s![.., n..n + 1, 0..s_len]], io.attention[s![b..b + 1, n..n + 1, .., s0..s0 + s_len]]);
        }
        if cfg.is_fp8_quantized {
            let view = a_sb[s![.., .., 0..s_len]];
            nisa::activation(view, nl::copy, view, scale = io.inv_input_scale_sb[s![0..cfg.d_size, ..]]);
            let q_sb = nl::ndarray([cfg.d_size, cfg.n_size, S_TILE_SIZE], QUANT_DTYPE, buffer = nl::sbuf);
            nisa::tensor_scalar(q_sb[s![.., .., 0..s_len]], view, nl::minimum, FP8_MAX, op1 = nl::maximum, operand1 = -FP8_MAX);
            return q_sb;
        }
        a_sb
    }

    /// The library's `_process_batch_tile`: one sequence tile of batch `b`
    /// against the weight block at columns `h0..h0 + cols` — per `P_MAX` rows
    /// and `F_MAX` columns the matmuls over the packed heads, the
    /// dequantization (`STATIC`) and bias in `attention`'s dtype, then the
    /// rows stored.
    #[nki_helper]
    pub fn process_batch_tile(cfg: TilingConfig, io: ProjectionTensors, w_sb: Sbuf, bias_sb: Sbuf, b: i64, s0: i64, h0: i64, cols: i64) {
        let s_len = (cfg.s_size - s0).min(S_TILE_SIZE);
        let a_sb = load_input_tensor(cfg, io, b, s0, s_len);
        for st in 0..s_len.div_ceil(P_MAX) {
            let r0 = st * P_MAX;
            let rows = (s_len - r0).min(P_MAX);
            let res_sb = nl::ndarray([P_MAX, cfg.h_block_size], io.attention.dtype(), buffer = nl::sbuf);
            for ht in 0..cols.div_ceil(F_MAX) {
                let c0 = ht * F_MAX;
                let cs = (cols - c0).min(F_MAX);
                let res_psum = nl::ndarray([P_MAX, F_MAX], nl::float32, buffer = nl::psum);
                let psum = res_psum[s![0..rows, 0..cs]];
                for n in 0..cfg.n_size {
                    nisa::nc_matmul(psum, a_sb[s![.., n, r0..r0 + rows]], w_sb[s![.., n, c0..c0 + cs]]);
                }
                let dst = res_sb[s![0..rows, c0..c0 + cs]];
                let bias = bias_sb[s![0..rows, c0..c0 + cs]];
                if cfg.is_fp8_quantized {
                    nisa::activation(dst, nl::copy, psum, scale = io.weight_scale_sb[s![0..rows, ..]]);
                }
                if cfg.is_fp8_quantized && io.bias.is_some() {
                    nisa::tensor_tensor(dst, dst, bias, nl::add);
                }
                if !cfg.is_fp8_quantized && io.bias.is_some() {
                    nisa::tensor_tensor(dst, psum, bias, nl::add);
                }
                if !cfg.is_fp8_quantized && io.bias.is_none() {
                    nisa::tensor_copy(dst, psum);
                }
            }
            let o0 = s0 + r0;
            nisa::dma_copy(io.out[s![b, o0..o0 + rows, h0..h0 + cols]], res_sb[s![0..rows, 0..cols]]);
        }
    }

    /// The library's `perform_float_projection` (and
    /// `perform_static_quantized_projection`): the program's weight blocks in
    /// turn, each against every batch and sequence tile.
    #[nki_helper]
    pub fn perform_projection(cfg: TilingConfig, io: ProjectionTensors) {
        for hb in 0..cfg.num_h_blocks_per_prg {
            let (h0, cols): (i64, i64) = h_block_bounds(cfg.prg_id, cfg.h_sharded_size, cfg.h_block_size, hb);
            let w_sb = load_float_weights(cfg, io, h0, cols);
            let bias_sb = load_bias(cfg, io, h0, cols);
            for b in 0..cfg.b_size {
                for st in 0..cfg.s_size.div_ceil(S_TILE_SIZE) {
                    process_batch_tile(cfg, io, w_sb, bias_sb, b, st * S_TILE_SIZE, h0, cols);
                }
            }
        }
    }

    /// The library's `validate_output_projection_inputs`: the rules of
    /// `output_projection_cte_violation`, the quantization and the tensors' shapes.
    #[nki_helper]
    pub fn validate_output_projection_inputs(
        attention: Hbm,
        weight: Hbm,
        bias: Option<Hbm>,
        quantization_type: QuantizationType,
        input_scales: Option<Hbm>,
        weight_scales: Option<Hbm>,
        programs: i64,
    ) {
        let is_static_mx = quantization_type == QuantizationType::STATIC_MX;
        let is_mx = quantization_type == QuantizationType::MX;
        let is_static = quantization_type == QuantizationType::STATIC;
        assert!(
            is_mx || is_static || is_static_mx || quantization_type == QuantizationType::NONE,
            "output_projection_cte: quantization_type must be QuantizationType.NONE, STATIC, MX or STATIC_MX (the members implemented), got {quantization_type}"
        );
        // Both MX forms lift the head-dim and head-count limits, as the library does.
        let mx_form = is_mx || is_static_mx;
        assert!(
            is_mx || (attention.dtype() != nl::float8_e4m3fn_x4 && weight.dtype() != nl::float4_e2m1fn_x4),
            "output_projection_cte: packed MX attention or weights need MX quantization"
        );
        assert!(attention.ndim() == 4, "output_projection_cte: attention must be [B, N, D, S], got {} dims", attention.ndim());
        let [b, n, d, sl] = attention.shape();
        let w_shape = weight.shape();
        assert!(
            is_mx || (weight.ndim() == 2 && w_shape[0] == n * d),
            "output_projection_cte: weight must be [N * D, H] with N * D = {}, got {w_shape}",
            n * d
        );
        let h = w_shape[1];
        assert!(
            b > 0 && n > 0 && d > 0 && sl > 0 && h > 0,
            "output_projection_cte: B, N, D, S, H and the LNC size must be positive, got attention {}",
            attention.shape()
        );
        assert!(b * sl <= MAX_VALIDATED_B_TIMES_S_SIZE, "output_projection_cte: B * S must be at most 131072, got {}", b * sl);
        assert!(mx_form || d <= P_MAX, "output_projection_cte: the head dim D must be at most 128, got D = {d}");
        assert!(h <= MAX_VALIDATED_H_SIZE, "output_projection_cte: H must be at most 20705, got H = {h}");
        assert!(mx_form || n <= MAX_VALIDATED_N_SIZE, "output_projection_cte: N must be at most 17, got N = {n}");
        assert!(h % programs == 0, "output_projection_cte: H must be a multiple of the LNC size, got H = {h}, LNC = {programs}");
        check_hidden_row(bias, "output_projection_cte", "bias", h);
        if is_mx {
            validate_mx_inputs(attention, weight, input_scales, weight_scales);
        } else {
            assert!(
                !is_static || weight.dtype() == QUANT_DTYPE,
                "output_projection_cte: STATIC quantization takes float8_e4m3 weights, got {}",
                weight.dtype()
            );
            assert!(is_static || weight.dtype() != QUANT_DTYPE, "output_projection_cte: float8_e4m3 weights need STATIC quantization");
            assert!(
                is_static_mx || weight.dtype() != nl::float8_e4m3fn,
                "output_projection_cte: float8_e4m3fn weights need STATIC_MX quantization"
            );
            if is_static_mx {
                validate_static_mx_inputs(attention, weight);
            }
            if is_static || is_static_mx {
                assert!(input_scales.is_some(), "output_projection_cte: input_scales is required for {quantization_type} quantization");
                assert!(weight_scales.is_some(), "output_projection_cte: weight_scales is required for {quantization_type} quantization");
                if let Some(isc) = input_scales {
                    let is_shape = isc.shape();
                    assert!(
                        isc.ndim() == 2 && is_shape[0] == P_MAX && is_shape[1] == 1,
                        "output_projection_cte: input_scales must be [128, 1], got {is_shape}"
                    );
                }
                if let Some(wsc) = weight_scales {
                    let ws_shape = wsc.shape();
                    assert!(
                        wsc.ndim() == 2 && ws_shape[0] == P_MAX && ws_shape[1] == 1,
                        "output_projection_cte: weight_scales must be [128, 1], got {ws_shape}"
                    );
                }
            }
        }
    }

    /// `out = attention @ weight (+ bias)` for prefill: `attention` `[B, N,
    /// D, S]`, `weight` `[N·D, H]`, `bias` `[1, H]`; returns `[B, S, H]` in
    /// `output_dtype` (default `attention`'s). `STATIC` takes `float8_e4m3`
    /// weights with `input_scales` and `weight_scales` `[128, 1]`, `STATIC_MX`
    /// pre-shuffled `float8_e4m3fn` ones with the same scales.
    #[nki_kernel]
    pub fn output_projection_cte(
        #[dtypes(float32, bfloat16, float16, float8_e4m3fn_x4)] attention: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float8_e4m3fn, float4_e2m1fn_x4)] weight: Hbm,
        #[dtypes(float32, bfloat16, float16)] bias: Option<Hbm>,
        #[default(QuantizationType::NONE)] quantization_type: QuantizationType,
        #[dtypes(float32, uint8)] input_scales: Option<Hbm>,
        #[dtypes(float32, uint8)] weight_scales: Option<Hbm>,
        output_dtype: Option<Dtype>,
    ) -> Hbm {
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let prg_id = if grid { nl::program_id(0) } else { 0 };
        validate_output_projection_inputs(attention, weight, bias, quantization_type, input_scales, weight_scales, programs);
        if quantization_type == QuantizationType::MX {
            // Validated: weight_scales is given.
            let ws = weight_scales.unwrap_or(weight);
            return output_projection_cte_mx(attention, weight, bias, input_scales, ws, output_dtype, programs, prg_id);
        }
        if quantization_type == QuantizationType::STATIC_MX {
            // Validated: both scales are given.
            let (isc, wsc) = (input_scales.unwrap_or(weight), weight_scales.unwrap_or(weight));
            return output_projection_cte_static_mx(attention, weight, bias, isc, wsc, output_dtype, programs, prg_id);
        }
        let is_static = quantization_type == QuantizationType::STATIC;
        let cfg = build_tiling_config(attention, weight, programs, prg_id, is_static);
        let inv_input_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let weight_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        if let Some(isc) = input_scales {
            if let Some(wsc) = weight_scales {
                load_static_quant_scales(inv_input_scale_sb, weight_scale_sb, isc, wsc);
            }
        }
        let [b, _, _, sl] = attention.shape();
        let out = nl::ndarray([b, sl, cfg.h_size], output_dtype.unwrap_or(attention.dtype()), buffer = nl::shared_hbm);
        let io = ProjectionTensors {
            attention: attention.reshape([b, cfg.n_size, cfg.d_size, sl]),
            weight: weight.reshape([cfg.n_size, cfg.d_size, cfg.h_size]),
            bias,
            out,
            inv_input_scale_sb,
            weight_scale_sb,
        };
        perform_projection(cfg, io);
        out
    }
}
