//! The NKI library's `output_projection_tkg`: the projection after a
//! decode-phase (token generation) attention block, `out = attention @ weight
//! + bias`, for few tokens, the heads next to the tokens in the input.
//!
//! `attention` is `[D, B, N, S]` (head dim on the partitions), `weight`
//! `[N·D, H]` (row `n·D + d`), `bias` `[1, H]`. Result row `b·S + s`, column
//! `h`, is `Σ_{n,d} attention[d, b, n, s] · weight[n·D + d, h] (+ bias[0, h])`.
//! Without `TRANSPOSE_OUT` the output is `[B·S, H]`; with it `[128, LNC, H2,
//! B·S]`, column `h = h0·128·H2 + h1·H2 + h2` of token `t` at `[h1, h0, h2,
//! t]` (`H2 = H / LNC / 128`), the layout the next decode kernels read.
//!
//! ```text
//! H split over the LNC programs: program p owns columns p·H/LNC .. (p+1)·H/LNC
//! (head packing) when D % 32 == 0, G heads (the most dividing N with G·D <= 128)
//!     share the partitions: N' = N / G heads of D' = G·D rows
//! attn = shuffle(attention)   [D', N'·B·S]                (load_and_shuffle_attn)
//!     partition g·D + d, column n'·B·S + t: head n'·G + g, token t
//!     STATIC: attn = clip(attn / input_scale, ±240) in float8_e4m3
//! w = the program's columns     [D', N', H/LNC]           (load_weights)
//! not TRANSPOSE_OUT:                                      (output_projection_tkg_impl)
//!     for each tile of <= P_MAX tokens, each F_MAX-column tile f:
//!         psum[t, f] = Σ_n' attn[:, n', t]ᵀ @ w[:, n', f]     # tokens stationary
//!         out[t, f]  = dequant(psum) (+ bias)               (dequant_and_add_bias)
//!     store the token tile's rows
//! TRANSPOSE_OUT:                                          (output_projection_tkg_transpose_out_impl)
//!     for each PSUM tile: F_MAX / B·S values of h2 side by side (B·S <= F_MAX),
//!     or one h2 and an F_MAX-token piece (B·S > F_MAX):
//!         psum[h1, (h2, t)] = Σ_n' w[:, n', h1·H2 + h2]ᵀ @ attn[:, n', t]  # weights stationary
//!         out[h1, (h2, t)]  = dequant(psum) (+ bias[h1·H2 + h2])
//!     store out[:, p, :, :]
//! ```
//!
//! Quantization: `STATIC` takes `float8_e4m3` weights and `[128, 1]` weight and
//! input scales (every row the same value). The activations are multiplied
//! by the reciprocal of the input scale (rounded to the input dtype), clipped
//! to `±240` and rounded to `float8_e4m3`; the fp32 sums are multiplied by
//! `weight_scale · input_scale`. `ROW` takes `float8_e4m3` weights and a
//! `[128, H]` scale (every row the same) multiplying column `h`; the
//! activations keep their dtype. Dequantized values are rounded to the output
//! (input) dtype before the bias is added, as the library does.
//!
//! The kernel takes the library's signature, `attention, weight, bias=None,
//! quantization_type=QuantizationType.NONE, weight_scale=None,
//! input_scale=None, TRANSPOSE_OUT=False, OUT_IN_SB=False`, with the library's
//! [`QuantizationType`] enum (`MX`, `STATIC_MX` and `ROW_MX` refused, as by
//! the library). The library's trailing `sbm` SBUF allocator has no
//! counterpart (tiles are placed by the compiler); `OUT_IN_SB=True` (the
//! result left in SBUF for a calling kernel) is refused: launched on its own
//! the kernel returns HBM, and a calling kernel uses the phase helpers. The
//! library's double-row fp8 matmul (a NeuronCore-v3 speed-up of `STATIC`
//! for even head counts and `B·S >= 64`) is one matmul per head here: the
//! same products, summed in fp32. The rules are
//! [`output_projection_tkg_violation`]'s.

// The kernel keeps the library's parameter names (`TRANSPOSE_OUT`, `OUT_IN_SB`).
#![allow(non_snake_case)]

use nki::prelude::*;

pub use kernel::*;

/// The shape and options of one `output_projection_tkg` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputProjectionTkgShape {
    /// Head dim `D`.
    pub d: i64,
    /// Batch `B`.
    pub b: i64,
    /// Heads `N`.
    pub n: i64,
    /// Tokens per sequence `S`.
    pub s: i64,
    /// Hidden size `H`.
    pub h: i64,
    /// LNC programs.
    pub programs: i64,
    /// `TRANSPOSE_OUT`.
    pub transpose_out: bool,
    /// Whether `weight` is float32 (the transposed layout's smaller limit).
    pub fp32_weight: bool,
}

/// Why an `output_projection_tkg` shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputProjectionTkgRule {
    /// A dimension is not positive.
    Positive,
    /// `D` is above 128.
    HeadDim,
    /// `H` does not split evenly over the LNC programs.
    HiddenShards,
    /// With `TRANSPOSE_OUT`, `H` is not a multiple of `128 · LNC`.
    TransposedHidden,
    /// With `TRANSPOSE_OUT`, `N · H` is above the validated limit.
    TransposedSize,
}

impl OutputProjectionTkgRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            OutputProjectionTkgRule::Positive => "output_projection_tkg: D, B, N, S, H and the LNC size must be positive",
            OutputProjectionTkgRule::HeadDim => "output_projection_tkg: the head dim D must be at most 128",
            OutputProjectionTkgRule::HiddenShards => "output_projection_tkg: H must be a multiple of the LNC size",
            OutputProjectionTkgRule::TransposedHidden => "output_projection_tkg: with TRANSPOSE_OUT, H must be a multiple of 128 * LNC",
            OutputProjectionTkgRule::TransposedSize => {
                "output_projection_tkg: with TRANSPOSE_OUT, N * H must be at most 163840 (81920 for float32 weights)"
            }
        }
    }
}

/// The first rule `shape` breaks.
pub const fn output_projection_tkg_violation(shape: OutputProjectionTkgShape) -> Option<OutputProjectionTkgRule> {
    let OutputProjectionTkgShape { d, b, n, s, h, programs, transpose_out, fp32_weight } = shape;
    if d <= 0 || b <= 0 || n <= 0 || s <= 0 || h <= 0 || programs <= 0 {
        return Some(OutputProjectionTkgRule::Positive);
    }
    if d > P_MAX {
        return Some(OutputProjectionTkgRule::HeadDim);
    }
    if h % programs != 0 {
        return Some(OutputProjectionTkgRule::HiddenShards);
    }
    if transpose_out && h % (P_MAX * programs) != 0 {
        return Some(OutputProjectionTkgRule::TransposedHidden);
    }
    let limit = if fp32_weight { MAX_VALIDATED_N_TIMES_H_SIZE_FP32 } else { MAX_VALIDATED_N_TIMES_H_SIZE };
    if transpose_out && n * h > limit {
        return Some(OutputProjectionTkgRule::TransposedSize);
    }
    None
}

/// An `output_projection_tkg` shape checked at compile time (16-bit weights),
/// or a compile error naming the rule it breaks.
///
/// ```
/// let shape = nkilib::output_projection_tkg_config!(d = 128, b = 4, n = 8, s = 4, h = 16384, programs = 2, transpose_out = true);
/// assert_eq!(shape.h, 16384);
/// ```
///
/// ```compile_fail
/// // H = 3000 is not a multiple of 128 * 2.
/// let shape = nkilib::output_projection_tkg_config!(d = 64, b = 4, n = 8, s = 4, h = 3000, programs = 2, transpose_out = true);
/// ```
#[macro_export]
macro_rules! output_projection_tkg_config {
    (d = $d:expr,b = $b:expr,n = $n:expr,s = $s:expr,h = $h:expr,programs = $p:expr,transpose_out = $t:expr) => {{
        const SHAPE: $crate::output_projection::output_projection_tkg::OutputProjectionTkgShape =
            $crate::output_projection::output_projection_tkg::OutputProjectionTkgShape {
                d: $d,
                b: $b,
                n: $n,
                s: $s,
                h: $h,
                programs: $p,
                transpose_out: $t,
                fp32_weight: false,
            };
        const _: () = if let Some(rule) = $crate::output_projection::output_projection_tkg::output_projection_tkg_violation(SHAPE) {
            panic!("{}", rule.message());
        };
        SHAPE
    }};
}

/// The kernel, its tile constants, bundles and phase helpers.
#[nki_module]
pub mod kernel {
    use crate::output_projection::output_projection_utils::calculate_head_packing;
    pub use crate::output_projection::output_projection_utils::{F_MAX, FP8_MAX, P_MAX, QUANT_DTYPE};
    pub use crate::utils::common_types::QuantizationType;
    use crate::utils::kernel_helpers::check_hidden_row;
    use nki::prelude::*;

    /// Weight columns per load when a program's share is a multiple of it.
    pub const H_BLOCK_SIZE: i64 = 2048;
    /// Head dims that are a multiple of this pack several heads on the partitions.
    pub const HEAD_PACKING_ALIGN: i64 = 32;
    /// The largest `N · H` validated with `TRANSPOSE_OUT` (16-bit weights).
    pub const MAX_VALIDATED_N_TIMES_H_SIZE: i64 = 163840;
    /// The largest `N · H` validated with `TRANSPOSE_OUT` (float32 weights).
    pub const MAX_VALIDATED_N_TIMES_H_SIZE_FP32: i64 = 81920;

    /// The library's `OutputProjectionTkgConfig`: the call's sizes, its
    /// program's share and the head packing.
    #[nki_object]
    pub struct OutputProjectionTkgConfig {
        /// `D` as given.
        pub d_original_size: i64,
        /// `B`.
        pub b_size: i64,
        /// `N` as given.
        pub n_original_size: i64,
        /// `S`.
        pub s_size: i64,
        /// `H`.
        pub h_size: i64,
        /// LNC programs.
        pub num_prgs: i64,
        /// This program.
        pub prg_id: i64,
        /// `STATIC` or `ROW`.
        pub is_quantized: bool,
        /// The quantization.
        pub quantization_type: QuantizationType,
        /// Whether a bias is added.
        pub has_bias: bool,
        /// The dtype of `attention` and of the output.
        pub io_dtype: Dtype,
        /// Packed heads `N' = N / G`.
        pub n_size: i64,
        /// Contraction rows per packed head `D' = G · D`.
        pub d_size: i64,
        /// Heads per packed head `G`.
        pub group_size: i64,
        /// Columns per program, `H / LNC`.
        pub h_sharded: i64,
        /// `TRANSPOSE_OUT`'s `H0` (the LNC size).
        pub h_0_size: i64,
        /// `TRANSPOSE_OUT`'s `H1` (128).
        pub h_1_size: i64,
        /// `TRANSPOSE_OUT`'s `H2` (`H / LNC / 128`).
        pub h_2_size: i64,
    }

    /// The tensors the projection phases read.
    #[nki_object]
    pub struct OutputProjectionTkgTensors {
        /// `[1, H]` in HBM.
        pub bias: Option<Tensor>,
        /// `weight` seen as `[N', D', H]`.
        pub w_reshaped: Tensor,
        /// `STATIC`: `weight_scale · input_scale` on each partition, `[128, 1]` fp32 in SBUF.
        pub combined_scale_sb: Tensor,
        /// `ROW`: the `[128, H]` column scales in HBM.
        pub weight_scale_hbm: Option<Tensor>,
        /// The shuffled activations `[D', N'·B·S]` in SBUF.
        pub attn_shuffled: Tensor,
    }

    /// The library's `_validate_and_create_config`: the call's rules (those
    /// of `output_projection_tkg_violation` and the tensors' shapes) and its
    /// configuration on this program.
    #[nki_helper]
    pub fn validate_and_create_config(
        attention: Hbm,
        weight: Hbm,
        bias: Option<Hbm>,
        quantization_type: QuantizationType,
        weight_scale: Option<Hbm>,
        input_scale: Option<Hbm>,
        transpose_out: bool,
    ) -> OutputProjectionTkgConfig {
        assert!(attention.ndim() == 4, "output_projection_tkg: attention must be [D, B, N, S], got {} dims", attention.ndim());
        let [d, b, n, sl] = attention.shape();
        let w_shape = weight.shape();
        assert!(
            weight.ndim() == 2 && w_shape[0] == n * d,
            "output_projection_tkg: weight must be [N * D, H] with N * D = {}, got {w_shape}",
            n * d
        );
        let h = w_shape[1];
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let prg_id = if grid { nl::program_id(0) } else { 0 };
        assert!(
            d > 0 && b > 0 && n > 0 && sl > 0 && h > 0,
            "output_projection_tkg: D, B, N, S, H and the LNC size must be positive, got attention {}",
            attention.shape()
        );
        assert!(d <= P_MAX, "output_projection_tkg: the head dim D must be at most 128, got D = {d}");
        assert!(h % programs == 0, "output_projection_tkg: H must be a multiple of the LNC size, got H = {h}, LNC = {programs}");
        assert!(
            !transpose_out || h % (P_MAX * programs) == 0,
            "output_projection_tkg: with TRANSPOSE_OUT, H must be a multiple of 128 * LNC, got H = {h}, LNC = {programs}"
        );
        let limit = if weight.dtype() == nl::float32 { MAX_VALIDATED_N_TIMES_H_SIZE_FP32 } else { MAX_VALIDATED_N_TIMES_H_SIZE };
        assert!(
            !transpose_out || n * h <= limit,
            "output_projection_tkg: with TRANSPOSE_OUT, N * H must be at most 163840 (81920 for float32 weights), got N * H = {}",
            n * h
        );
        check_hidden_row(bias, "output_projection_tkg", "bias", h);
        let is_static = quantization_type == QuantizationType::STATIC;
        let is_row = quantization_type == QuantizationType::ROW;
        assert!(
            is_static || is_row || quantization_type == QuantizationType::NONE,
            "output_projection_tkg: quantization_type must be QuantizationType.NONE, STATIC or ROW, got {quantization_type}"
        );
        assert!(
            !(is_static || is_row) || weight.dtype() == QUANT_DTYPE,
            "output_projection_tkg: STATIC and ROW quantization take float8_e4m3 weights, got {}",
            weight.dtype()
        );
        assert!(
            is_static || is_row || weight.dtype() != QUANT_DTYPE,
            "output_projection_tkg: float8_e4m3 weights need STATIC or ROW quantization"
        );
        if is_static || is_row {
            assert!(weight_scale.is_some(), "output_projection_tkg: weight_scale must be given for {quantization_type} quantization");
        }
        if is_static {
            assert!(input_scale.is_some(), "output_projection_tkg: input_scale must be given for STATIC quantization");
        }
        if let Some(ws) = weight_scale {
            let want = if is_row { h } else { 1 };
            let ws_shape = ws.shape();
            assert!(
                !(is_static || is_row) || (ws.ndim() == 2 && ws_shape[0] == P_MAX && ws_shape[1] == want),
                "output_projection_tkg: weight_scale must be [128, {want}], got {ws_shape}"
            );
        }
        if let Some(isc) = input_scale {
            let is_shape = isc.shape();
            assert!(
                !is_static || (isc.ndim() == 2 && is_shape[0] == P_MAX && is_shape[1] == 1),
                "output_projection_tkg: input_scale must be [128, 1], got {is_shape}"
            );
        }
        let (n_size, d_size, group_size) = if d % HEAD_PACKING_ALIGN == 0 { calculate_head_packing(n, d, P_MAX) } else { (n, d, 1) };
        OutputProjectionTkgConfig {
            d_original_size: d,
            b_size: b,
            n_original_size: n,
            s_size: sl,
            h_size: h,
            num_prgs: programs,
            prg_id,
            is_quantized: is_static || is_row,
            quantization_type,
            has_bias: bias.is_some(),
            io_dtype: attention.dtype(),
            n_size,
            d_size,
            group_size,
            h_sharded: h / programs,
            h_0_size: programs,
            h_1_size: P_MAX,
            h_2_size: h / programs / P_MAX,
        }
    }

    /// `STATIC`'s scales into SBUF: `combined_scale_sb = weight_scale ·
    /// input_scale` and `inv_input_scale_sb = 1 / input_scale`, `[128, 1]` fp32.
    #[nki_helper]
    pub fn load_static_scales(weight_scale: Hbm, input_scale: Hbm, combined_scale_sb: Sbuf, inv_input_scale_sb: Sbuf) {
        let weight_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let input_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(weight_scale_sb, weight_scale);
        nisa::dma_copy(input_scale_sb, input_scale);
        nisa::activation(combined_scale_sb, nl::copy, weight_scale_sb, scale = input_scale_sb);
        nisa::reciprocal(inv_input_scale_sb, input_scale_sb);
    }

    /// The library's `_load_and_shuffle_attn`: `attention` `[D, B, N, S]` into
    /// `[D', N'·B·S]`, head `n = n'·G + g` of token `t` at partition `g·D + d`,
    /// column `n'·B·S + t` (one DMA per head). `STATIC`: times the reciprocal
    /// input scale (`inv_input_scale_sb`), clipped to `±240` and rounded to
    /// `float8_e4m3`.
    #[nki_helper]
    pub fn load_and_shuffle_attn(attention: Hbm, inv_input_scale_sb: Sbuf, cfg: OutputProjectionTkgConfig) -> Sbuf {
        let (d, bxs) = (cfg.d_original_size, cfg.b_size * cfg.s_size);
        let attn_sb = nl::ndarray([cfg.d_size, cfg.n_size * bxs], cfg.io_dtype, buffer = nl::sbuf);
        for n in 0..cfg.n_original_size {
            let (n_group, n_offset) = (n / cfg.group_size, n % cfg.group_size);
            let (p0, c0) = (n_offset * d, n_group * bxs);
            nisa::dma_copy(attn_sb[s![p0..p0 + d, c0..c0 + bxs]], attention[s![.., .., n..n + 1, ..]]);
        }
        if cfg.quantization_type == QuantizationType::STATIC {
            nisa::activation(attn_sb, nl::copy, attn_sb, scale = inv_input_scale_sb[s![0..cfg.d_size, ..]]);
            let attn_q = nl::ndarray([cfg.d_size, cfg.n_size * bxs], QUANT_DTYPE, buffer = nl::sbuf);
            nisa::tensor_scalar(attn_q, attn_sb, nl::minimum, FP8_MAX, op1 = nl::maximum, operand1 = -FP8_MAX);
            return attn_q;
        }
        attn_sb
    }

    /// The program's `H / LNC` weight columns as `[D', N', H / LNC]` in SBUF,
    /// one DMA per head and `H_BLOCK_SIZE` block (a single block when the
    /// share is not a multiple of it).
    #[nki_helper]
    pub fn load_weights(cfg: OutputProjectionTkgConfig, io: OutputProjectionTkgTensors) -> Sbuf {
        let hs = cfg.h_sharded;
        let h_block_size = if hs % H_BLOCK_SIZE == 0 { H_BLOCK_SIZE } else { hs };
        let w_sb = nl::ndarray([cfg.d_size, cfg.n_size, hs], io.w_reshaped.dtype(), buffer = nl::sbuf);
        for hb in 0..hs / h_block_size {
            let (c0, h0) = (hb * h_block_size, cfg.prg_id * hs + hb * h_block_size);
            for n in 0..cfg.n_size {
                nisa::dma_copy(w_sb[s![.., n..n + 1, c0..c0 + h_block_size]], io.w_reshaped[s![n..n + 1, .., h0..h0 + h_block_size]]);
            }
        }
        w_sb
    }

    /// One PSUM tile `res` into its output slice `dst`: dequantized (`ROW`:
    /// times `row_scale`; `STATIC`: times the combined scale) and rounded to
    /// the output dtype, then `bias` added; or copied.
    #[nki_helper]
    pub fn dequant_and_add_bias(
        cfg: OutputProjectionTkgConfig,
        io: OutputProjectionTkgTensors,
        dst: Sbuf,
        res: Psum,
        row_scale: Sbuf,
        bias: Sbuf,
    ) {
        let rows = dst.shape()[0];
        let quant = cfg.quantization_type;
        if quant == QuantizationType::ROW {
            nisa::tensor_tensor(dst, res, row_scale, nl::multiply);
        }
        if quant == QuantizationType::STATIC {
            nisa::activation(dst, nl::copy, res, scale = io.combined_scale_sb[s![0..rows, ..]]);
        }
        if cfg.has_bias && cfg.is_quantized {
            nisa::tensor_tensor(dst, dst, bias, nl::add);
        }
        if cfg.has_bias && !cfg.is_quantized {
            nisa::tensor_tensor(dst, res, bias, nl::add);
        }
        if !cfg.has_bias && !cfg.is_quantized {
            nisa::tensor_copy(dst, res);
        }
    }

    /// `rows` copies of the program's bias columns, `[rows, H / LNC]` (a
    /// broadcast DMA); an unused tile without a bias.
    #[nki_helper]
    pub fn load_bias_rows(cfg: OutputProjectionTkgConfig, io: OutputProjectionTkgTensors, rows: i64) -> Sbuf {
        let (hs, h_prg) = (cfg.h_sharded, cfg.prg_id * cfg.h_sharded);
        let bias_sb = nl::ndarray([rows, hs], cfg.io_dtype, buffer = nl::sbuf);
        if let Some(bv) = io.bias {
            nisa::dma_copy(bias_sb, bv[s![.., h_prg..h_prg + hs]].broadcast(0, rows));
        }
        bias_sb
    }

    /// `ROW`: the program's column scales for `rows` token rows, `[rows, H / LNC]` fp32.
    #[nki_helper]
    pub fn load_row_scales(cfg: OutputProjectionTkgConfig, io: OutputProjectionTkgTensors, rows: i64) -> Sbuf {
        let (hs, h_prg) = (cfg.h_sharded, cfg.prg_id * cfg.h_sharded);
        let scale_sb = nl::ndarray([rows, hs], nl::float32, buffer = nl::sbuf);
        if cfg.quantization_type == QuantizationType::ROW {
            if let Some(ws) = io.weight_scale_hbm {
                nisa::dma_copy(scale_sb, ws[s![0..rows, h_prg..h_prg + hs]]);
            }
        }
        scale_sb
    }

    /// The library's `_output_projection_tkg_impl`: `[B·S, H]` rows, each
    /// tile of up to 128 tokens stationary, the weights moving `F_MAX` columns
    /// at a time, accumulated over the packed heads; each token tile stored
    /// to the program's columns of `out`.
    #[nki_helper]
    pub fn output_projection_tkg_impl(out: Hbm, cfg: OutputProjectionTkgConfig, io: OutputProjectionTkgTensors) {
        let (bxs, hs) = (cfg.b_size * cfg.s_size, cfg.h_sharded);
        let h_prg = cfg.prg_id * hs;
        let block_rows = bxs.min(P_MAX);
        let bias_sb = load_bias_rows(cfg, io, block_rows);
        let scale_sb = load_row_scales(cfg, io, block_rows);
        let w_sb = load_weights(cfg, io);
        for bt in 0..bxs.div_ceil(P_MAX) {
            let t0 = bt * P_MAX;
            let rows = (bxs - t0).min(P_MAX);
            let out_sb = nl::ndarray([P_MAX, hs], cfg.io_dtype, buffer = nl::sbuf);
            for ft in 0..hs.div_ceil(F_MAX) {
                let f0 = ft * F_MAX;
                let fs = (hs - f0).min(F_MAX);
                let res_psum = nl::ndarray([P_MAX, F_MAX], nl::float32, buffer = nl::psum);
                for n in 0..cfg.n_size {
                    let c0 = n * bxs + t0;
                    nisa::nc_matmul(res_psum[s![0..rows, 0..fs]], io.attn_shuffled[s![.., c0..c0 + rows]], w_sb[s![.., n, f0..f0 + fs]]);
                }
                dequant_and_add_bias(
                    cfg,
                    io,
                    out_sb[s![0..rows, f0..f0 + fs]],
                    res_psum[s![0..rows, 0..fs]],
                    scale_sb[s![0..rows, f0..f0 + fs]],
                    bias_sb[s![0..rows, f0..f0 + fs]],
                );
            }
            nisa::dma_copy(out[s![t0..t0 + rows, h_prg..h_prg + hs]], out_sb[s![0..rows, ..]]);
        }
    }

    /// The library's `_output_projection_tkg_transpose_out_impl`: the
    /// program's `[128, H2, B·S]` block of the `[128, LNC, H2, B·S]` output,
    /// the weights stationary (column `h1·H2 + h2` on PSUM partition `h1`),
    /// the tokens moving; `F_MAX / B·S` values of `h2` share a PSUM bank (for
    /// `B·S > F_MAX`, one `h2` takes `F_MAX`-token pieces).
    #[nki_helper]
    pub fn output_projection_tkg_transpose_out_impl(out: Hbm, cfg: OutputProjectionTkgConfig, io: OutputProjectionTkgTensors) {
        let (bxs, h1, h2) = (cfg.b_size * cfg.s_size, cfg.h_1_size, cfg.h_2_size);
        let h_prg = cfg.prg_id * cfg.h_sharded;
        let bias_sb = nl::ndarray([h1, h2, 1], cfg.io_dtype, buffer = nl::sbuf);
        if let Some(bv) = io.bias {
            nisa::dma_copy(bias_sb, bv.reshape([cfg.num_prgs * h1, h2])[s![cfg.prg_id * h1..(cfg.prg_id + 1) * h1, ..]]);
        }
        let scale_sb = nl::ndarray([h1, h2, 1], nl::float32, buffer = nl::sbuf);
        if cfg.quantization_type == QuantizationType::ROW {
            if let Some(ws) = io.weight_scale_hbm {
                nisa::dma_copy(scale_sb, ws[s![0..1, h_prg..h_prg + cfg.h_sharded]]);
            }
        }
        let w_flat: Sbuf = load_weights(cfg, io);
        let w_sb = w_flat.reshape([cfg.d_size, cfg.n_size, h1, h2]);
        let out_sb = nl::ndarray([h1, h2 * bxs], cfg.io_dtype, buffer = nl::sbuf);
        let packed = bxs <= F_MAX;
        let per_bank = if packed { F_MAX / bxs } else { 1 };
        let pieces = if packed { 1 } else { bxs.div_ceil(F_MAX) };
        for ti in 0..h2.div_ceil(per_bank) * pieces {
            let h2_base = if packed { ti * per_bank } else { ti / pieces };
            let t0 = if packed { 0 } else { (ti % pieces) * F_MAX };
            let ts = (bxs - t0).min(F_MAX);
            let k = per_bank.min(h2 - h2_base);
            let res_psum = nl::ndarray([h1, F_MAX], nl::float32, buffer = nl::psum);
            for g in 0..k {
                for n in 0..cfg.n_size {
                    let c0 = n * bxs + t0;
                    nisa::nc_matmul(
                        res_psum[s![.., g * ts..(g + 1) * ts]],
                        w_sb[s![.., n, .., h2_base + g]],
                        io.attn_shuffled[s![.., c0..c0 + ts]],
                    );
                }
            }
            let o0 = h2_base * bxs + t0;
            dequant_and_add_bias(
                cfg,
                io,
                out_sb[s![.., o0..o0 + k * ts]],
                res_psum[s![.., 0..k * ts]],
                scale_sb[s![.., h2_base..h2_base + k, ..]].broadcast(2, ts),
                bias_sb[s![.., h2_base..h2_base + k, ..]].broadcast(2, ts),
            );
        }
        nisa::dma_copy(out[s![.., cfg.prg_id, .., ..]], out_sb);
    }

    /// `out = attention @ weight (+ bias)` for decode: `attention` `[D, B, N,
    /// S]`, `weight` `[N·D, H]`, `bias` `[1, H]`; returns `[B·S, H]`, or with
    /// `TRANSPOSE_OUT` `[128, LNC, H / LNC / 128, B·S]` (the module docs'
    /// layout), in `attention`'s dtype. `STATIC` takes `float8_e4m3` weights
    /// with `weight_scale` and `input_scale` `[128, 1]`; `ROW` `float8_e4m3`
    /// weights with `weight_scale` `[128, H]`.
    #[nki_kernel]
    pub fn output_projection_tkg(
        #[dtypes(float32, bfloat16, float16)] attention: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] weight: Hbm,
        #[dtypes(float32, bfloat16, float16)] bias: Option<Hbm>,
        #[default(QuantizationType::NONE)] quantization_type: QuantizationType,
        #[dtypes(float32)] weight_scale: Option<Hbm>,
        #[dtypes(float32)] input_scale: Option<Hbm>,
        #[default(false)] TRANSPOSE_OUT: bool,
        #[default(false)] OUT_IN_SB: bool,
    ) -> Hbm {
        let cfg = validate_and_create_config(attention, weight, bias, quantization_type, weight_scale, input_scale, TRANSPOSE_OUT);
        assert!(
            !OUT_IN_SB,
            "output_projection_tkg: OUT_IN_SB=True leaves the result in SBUF for a calling kernel; launched alone the result is in HBM"
        );
        let combined_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let inv_input_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        if quantization_type == QuantizationType::STATIC {
            if let Some(ws) = weight_scale {
                if let Some(isc) = input_scale {
                    load_static_scales(ws, isc, combined_scale_sb, inv_input_scale_sb);
                }
            }
        }
        let io = OutputProjectionTkgTensors {
            bias,
            w_reshaped: weight.reshape([cfg.n_size, cfg.d_size, cfg.h_size]),
            combined_scale_sb,
            weight_scale_hbm: weight_scale,
            attn_shuffled: load_and_shuffle_attn(attention, inv_input_scale_sb, cfg),
        };
        let bxs = cfg.b_size * cfg.s_size;
        if TRANSPOSE_OUT {
            let out = nl::ndarray([cfg.h_1_size, cfg.h_0_size, cfg.h_2_size, bxs], cfg.io_dtype, buffer = nl::shared_hbm);
            output_projection_tkg_transpose_out_impl(out, cfg, io);
            return out;
        }
        let out = nl::ndarray([bxs, cfg.h_size], cfg.io_dtype, buffer = nl::shared_hbm);
        output_projection_tkg_impl(out, cfg, io);
        out
    }
}
