//! The NKI library's `rmsnorm_quant_kernel`: optional RMSNorm of each row of
//! `hidden` followed by 8-bit (`float8_e4m3`) quantization of the row, its
//! dequantization scale packed into the same output tensor.
//!
//! The input is viewed as 2-D, `[OD, PD]` (`OD` the product of the leading dims,
//! `B·S` for `[B, S, H]`; `PD = H`), and processed in tiles of up to 128 rows
//! (partitions), each row whole along the free axis:
//!
//! ```text
//! for each tile of up to 128 rows:
//!     t = load rows                                        # [rows, H] bfloat16
//!     if RMS_NORM:
//!         ss   = activation_reduce(square, t, add)         # sum of squares, fp32
//!         rrms = activation(rsqrt, ss, scale=1/H, bias=eps) # 1 / sqrt(mean + eps)
//!         for each 512-column tile of H:
//!             g = ones[1, rows]ᵀ @ ln_w[1, cols]           # gamma on every row (PE, PSUM)
//!             t[:, cols] = t[:, cols] * rrms * g           # in place, bfloat16
//!     if ROW quantization:
//!         m = max |t| per row                              # fp32
//!         if lower_bound: m = min(m, lower_bound); t = clip(t, ±lower_bound)
//!         d = max(m / 240, 1e-6)                           # the dequantization scale
//!         q = t * (1 / d)                                  # float8_e4m3
//!         store q in out[:, :H], the 4 bytes of fp32 d in out[:, H:H+4]
//!     else (STATIC):
//!         q = clip(t / input_dequant_scale, ±240)          # float8_e4m3
//!         store q in out (no scale columns)
//! ```
//!
//! The row data is held in `COMPUTE_DTYPE` (bfloat16) as in the library: the
//! load, the normalised row and (static) the scaled row are rounded to it; the
//! sums, `rrms`, the gamma broadcast and the scales are fp32; quantized values
//! are rounded to nearest even into `float8_e4m3` (largest finite 240). With
//! row quantization the output's last dim is `H + 4`: the four `float8_e4m3`
//! elements after each row's `H` codes are the little-endian bytes of the row's
//! fp32 dequantization scale (`out[..., H:].view(float32)`), written through a
//! byte view of the scale column (`.ap(.., dtype=float8_e4m3)`).
//!
//! With a 1-D launch grid (LNC2) the rows are split over the programs, the last
//! program taking the remainder, and each program runs the loop above on its
//! rows.
//!
//! The kernel takes the library's signature, `hidden, ln_w, kargs,
//! input_dequant_scale=None`, with `kargs` the [`RmsNormQuantKernelArgs`]
//! bundle (the dataclass's fields, order and defaults); its `norm_type` and
//! `quantization_type` are members of the library's [`NormType`] and
//! [`QuantizationType`] enums (same names and values). The kernel implements
//! `NO_NORM` and `RMS_NORM`, `ROW` and `STATIC`, and refuses the other members
//! naming the field and the member. The library's fused
//! pre-norm and residual options (`pre_norm_gamma`, `residual`) and its
//! `dtype_mode` are not taken. The library documents `B` up to 2, `S` up to
//! 32768 and `H` up to 16384; inputs of rank 2 and 3 are accepted.

use nki::prelude::*;

pub use kernel::*;

/// Why an `rmsnorm_quant_kernel` configuration or shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmsNormQuantRule {
    /// `kargs.quantization_type` is not `ROW` or `STATIC`.
    QuantizationType,
    /// `kargs.norm_type` is not `NO_NORM` or `RMS_NORM`.
    NormType,
    /// `kargs.lower_bound` is negative.
    LowerBound,
    /// `kargs.eps` is negative.
    Eps,
    /// `hidden` has fewer than 2 or more than 3 dims.
    Rank,
    /// `B` (3-D input) is above `MAX_B`.
    Batch,
    /// `S` (3-D input) is above `MAX_S`.
    Seq,
    /// `H` is above `MAX_H`.
    Hidden,
    /// The outer dim of a 2-D input is above `MAX_B · MAX_S`.
    Outer,
}

impl RmsNormQuantRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            RmsNormQuantRule::QuantizationType => {
                "rmsnorm_quant: kargs.quantization_type must be QuantizationType.ROW or QuantizationType.STATIC (the members implemented)"
            }
            RmsNormQuantRule::NormType => {
                "rmsnorm_quant: kargs.norm_type must be NormType.NO_NORM or NormType.RMS_NORM (the members implemented)"
            }
            RmsNormQuantRule::LowerBound => "rmsnorm_quant: kargs.lower_bound must be non-negative",
            RmsNormQuantRule::Eps => "rmsnorm_quant: kargs.eps must be non-negative",
            RmsNormQuantRule::Rank => "rmsnorm_quant: hidden must have 2 or 3 dims",
            RmsNormQuantRule::Batch => "rmsnorm_quant: B must be at most MAX_B = 2",
            RmsNormQuantRule::Seq => "rmsnorm_quant: S must be at most MAX_S = 32768",
            RmsNormQuantRule::Hidden => "rmsnorm_quant: H must be at most MAX_H = 16384",
            RmsNormQuantRule::Outer => "rmsnorm_quant: the outer dim of a 2-D input must be at most MAX_B * MAX_S = 65536",
        }
    }
}

/// The first rule `kargs` and the shape of `hidden` (`dims` of `[B, S, H]`,
/// `S` unused when `rank` is 2) break.
pub const fn rmsnorm_quant_violation(kargs: &RmsNormQuantKernelArgs, rank: i64, dims: [i64; 3]) -> Option<RmsNormQuantRule> {
    // `matches!`, not `==`: comparing enums is not `const`.
    if !matches!(kargs.quantization_type, QuantizationType::ROW | QuantizationType::STATIC) {
        return Some(RmsNormQuantRule::QuantizationType);
    }
    if !matches!(kargs.norm_type, NormType::NO_NORM | NormType::RMS_NORM) {
        return Some(RmsNormQuantRule::NormType);
    }
    // NaN is refused too, as by the kernel's `lower_bound >= 0` assertion.
    if kargs.lower_bound.is_nan() || kargs.lower_bound < 0.0 {
        return Some(RmsNormQuantRule::LowerBound);
    }
    if kargs.eps.is_nan() || kargs.eps < 0.0 {
        return Some(RmsNormQuantRule::Eps);
    }
    if rank != 2 && rank != 3 {
        return Some(RmsNormQuantRule::Rank);
    }
    let h = if rank == 3 { dims[2] } else { dims[1] };
    if rank == 3 && dims[0] > MAX_B {
        return Some(RmsNormQuantRule::Batch);
    }
    if rank == 3 && dims[1] > MAX_S {
        return Some(RmsNormQuantRule::Seq);
    }
    if h > MAX_H {
        return Some(RmsNormQuantRule::Hidden);
    }
    if rank == 2 && dims[0] > MAX_B * MAX_S {
        return Some(RmsNormQuantRule::Outer);
    }
    None
}

/// An `rmsnorm_quant_kernel` configuration checked at compile time: `kargs`
/// (a constant expression) and the `[B, S, H]` of `hidden`, or a compile error
/// naming the rule they break.
///
/// ```
/// use nkilib::rmsnorm::rmsnorm_quant::{NormType, QuantizationType, RmsNormQuantKernelArgs};
/// let (kargs, hidden) = nkilib::rmsnorm_quant_config!(
///     kargs = RmsNormQuantKernelArgs {
///         lower_bound: 0.0,
///         norm_type: NormType::RMS_NORM,
///         quantization_type: QuantizationType::ROW,
///         eps: 1e-6
///     },
///     hidden = [1, 2048, 8192]
/// );
/// assert_eq!((kargs.quantization_type, hidden), (QuantizationType::ROW, [1, 2048, 8192]));
/// ```
///
/// ```compile_fail
/// // B = 4 is above MAX_B = 2.
/// use nkilib::rmsnorm::rmsnorm_quant::{NormType, QuantizationType, RmsNormQuantKernelArgs};
/// let cfg = nkilib::rmsnorm_quant_config!(
///     kargs = RmsNormQuantKernelArgs {
///         lower_bound: 0.0,
///         norm_type: NormType::RMS_NORM,
///         quantization_type: QuantizationType::ROW,
///         eps: 1e-6
///     },
///     hidden = [4, 128, 1024]
/// );
/// ```
#[macro_export]
macro_rules! rmsnorm_quant_config {
    (kargs = $kargs:expr,hidden = [$b:expr, $s:expr, $h:expr]) => {{
        const KARGS: $crate::rmsnorm::rmsnorm_quant::RmsNormQuantKernelArgs = $kargs;
        const _: () = if let Some(rule) = $crate::rmsnorm::rmsnorm_quant::rmsnorm_quant_violation(&KARGS, 3, [$b, $s, $h]) {
            panic!("{}", rule.message());
        };
        (KARGS, [$b, $s, $h])
    }};
}

/// The kernel, its constants, configuration bundle and phase helpers.
#[nki_module]
pub mod kernel {
    pub use crate::utils::common_types::{NormType, QuantizationType};
    use nki::prelude::*;

    /// The largest batch the library supports.
    pub const MAX_B: i64 = 2;
    /// The longest sequence the library supports.
    pub const MAX_S: i64 = 32768;
    /// The largest hidden size the library supports.
    pub const MAX_H: i64 = 16384;
    /// Rows per tile: the partitions of an SBUF tile.
    pub const OUTER_TILE: i64 = 128;
    /// Columns per gamma broadcast: one matmul's moving free size (one fp32 PSUM bank).
    pub const PROC_TILE: i64 = 512;
    /// The dtype the rows are held in between the phases.
    pub const COMPUTE_DTYPE: Dtype = nl::bfloat16;
    /// The quantized dtype.
    pub const QUANT_DTYPE: Dtype = nl::float8_e4m3;
    /// The largest finite `float8_e4m3`: quantized rows span `[-240, 240]`.
    pub const QUANT_RANGE: f64 = 240.0;
    /// `float8_e4m3` elements holding one fp32 dequantization scale (4 bytes).
    pub const DEQUANT_SCALE_SIZE: i64 = 4;
    /// The smallest dequantization scale, so that its reciprocal stays finite.
    pub const MIN_DEQUANT_SCALE: f64 = 1e-6;
    /// A `lower_bound` at or below this is no bound (the library's `has_lower_bound`).
    pub const LOWER_BOUND_MIN: f64 = 1e-6;

    /// The library's `RmsNormQuantKernelArgs`: the kernel's configuration, with
    /// the dataclass's field names, types, order and defaults, shared by the phases.
    #[nki_object]
    pub struct RmsNormQuantKernelArgs {
        /// Clip bound of the row values and of the row scale (row quantization); `0` for none.
        #[default(0.0)]
        pub lower_bound: f64,
        /// `RMS_NORM` or `NO_NORM`.
        #[default(NormType::RMS_NORM)]
        pub norm_type: NormType,
        /// `ROW` or `STATIC`.
        #[default(QuantizationType::ROW)]
        pub quantization_type: QuantizationType,
        /// Added to the mean square before the reciprocal square root.
        #[default(1e-6)]
        pub eps: f64,
    }

    /// Phase 1: `t[:rows] = t[:rows] / sqrt(mean(t²) + eps) * gamma`, in place.
    ///
    /// The sum of squares comes from `activation_reduce`, the reciprocal RMS from
    /// `rsqrt(sum · (1/H) + eps)`; gamma `[1, H]` is broadcast to the rows 512
    /// columns at a time by a matmul with a ones row into PSUM, and applied with
    /// the reciprocal RMS by one `scalar_tensor_tensor` per column tile.
    #[nki_helper]
    pub fn rms_normalize_tile(kargs: RmsNormQuantKernelArgs, t: Sbuf, gamma: Sbuf, rows: i64) {
        let h = t.shape()[1];
        let squares = nl::ndarray([OUTER_TILE, h], nl::float32, buffer = nl::sbuf);
        let rrms = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
        let zero = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(zero, 0.0);
        nisa::activation_reduce(
            squares[s![0..rows, ..]],
            nl::square,
            t[s![0..rows, ..]],
            nl::add,
            rrms[s![0..rows, ..]],
            bias = zero[s![0..rows, ..]],
            scale = 1.0,
        );
        let eps = nl::ndarray([OUTER_TILE, 1], COMPUTE_DTYPE, buffer = nl::sbuf);
        nisa::memset(eps, kargs.eps);
        nisa::activation(rrms[s![0..rows, ..]], nl::rsqrt, rrms[s![0..rows, ..]], bias = eps[s![0..rows, ..]], scale = 1.0 / h as f64);
        // In gamma's dtype: a matmul takes two fp32 operands or none.
        let ones = nl::ndarray([1, OUTER_TILE], gamma.dtype(), buffer = nl::sbuf);
        nisa::memset(ones, 1.0);
        for j in nl::affine_range(h.div_ceil(PROC_TILE)) {
            let c0 = j * PROC_TILE;
            let cols = (h - c0).min(PROC_TILE);
            let g = nl::ndarray([OUTER_TILE, PROC_TILE], nl::float32, buffer = nl::psum);
            nisa::nc_matmul(g[s![0..rows, 0..cols]], ones[s![.., 0..rows]], gamma[s![.., c0..c0 + cols]]);
            nisa::scalar_tensor_tensor(
                t[s![0..rows, c0..c0 + cols]],
                t[s![0..rows, c0..c0 + cols]],
                nl::multiply,
                rrms[s![0..rows, ..]],
                nl::multiply,
                g[s![0..rows, 0..cols]],
            );
        }
    }

    /// Phase 2 (row quantization): `q[:rows] = t / d` with the row's
    /// dequantization scale `d = max(min(max|t|, lower_bound) / 240, 1e-6)` into
    /// `scales[:rows]`, `t` clipped to `±lower_bound` first when one is set.
    #[nki_helper]
    pub fn row_quantize_tile(kargs: RmsNormQuantKernelArgs, t: Sbuf, q: Sbuf, scales: Sbuf, rows: i64) {
        let h = t.shape()[1];
        // |t| as `abs_max(t, 0)` (the values of the unary ALU op `nl.abs`); its
        // row maximum is the absmax.
        let abs_tile = nl::ndarray([OUTER_TILE, h], COMPUTE_DTYPE, buffer = nl::sbuf);
        nisa::tensor_scalar_reduce(abs_tile[s![0..rows, ..]], t[s![0..rows, ..]], nl::abs_max, 0.0, nl::maximum, scales[s![0..rows, ..]]);
        if kargs.lower_bound > LOWER_BOUND_MIN {
            nisa::tensor_scalar(scales[s![0..rows, ..]], scales[s![0..rows, ..]], nl::minimum, kargs.lower_bound);
            nisa::tensor_scalar(
                t[s![0..rows, ..]],
                t[s![0..rows, ..]],
                nl::minimum,
                kargs.lower_bound,
                op1 = nl::maximum,
                operand1 = -kargs.lower_bound,
            );
        }
        let zero = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(zero, 0.0);
        nisa::activation(
            scales[s![0..rows, ..]],
            nl::copy,
            scales[s![0..rows, ..]],
            bias = zero[s![0..rows, ..]],
            scale = 1.0 / QUANT_RANGE,
        );
        nisa::tensor_scalar(scales[s![0..rows, ..]], scales[s![0..rows, ..]], nl::maximum, MIN_DEQUANT_SCALE);
        let quant_scales = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
        nisa::reciprocal(quant_scales[s![0..rows, ..]], scales[s![0..rows, ..]]);
        nisa::tensor_scalar(
            q[s![0..rows, ..]],
            t[s![0..rows, ..]],
            nl::multiply,
            quant_scales[s![0..rows, ..]],
            engine = nisa::engine::vector,
        );
    }

    /// Phase 2 (static quantization): `q[:rows] = clip(t * quant_scale, ±240)`,
    /// the product rounded into `t` first.
    #[nki_helper]
    pub fn static_quantize_tile(t: Sbuf, quant_scale: Sbuf, q: Sbuf, rows: i64) {
        let zero = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(zero, 0.0);
        nisa::tensor_scalar(
            t[s![0..rows, ..]],
            t[s![0..rows, ..]],
            nl::multiply,
            quant_scale[s![0..rows, ..]],
            op1 = nl::add,
            operand1 = zero[s![0..rows, ..]],
        );
        nisa::tensor_scalar(q[s![0..rows, ..]], t[s![0..rows, ..]], nl::minimum, QUANT_RANGE, op1 = nl::maximum, operand1 = -QUANT_RANGE);
    }

    /// The tile loop over the rows of `x` `[OD, H]` into `out` `[OD, H (+4)]`.
    #[nki_helper]
    pub fn rmsnorm_quant_rows(kargs: RmsNormQuantKernelArgs, x: Hbm, gamma: Hbm, input_dequant_scale: Option<Hbm>, out: Hbm) {
        let [od, h] = x.shape();
        let row_quant = kargs.quantization_type == QuantizationType::ROW;
        let g = nl::ndarray([1, h], gamma.dtype(), buffer = nl::sbuf);
        if kargs.norm_type == NormType::RMS_NORM {
            nisa::dma_copy(g, gamma);
        }
        // Static quantization: the reciprocal of the given scale, on every partition.
        let quant_scale = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
        if !row_quant {
            if let Some(sc) = input_dequant_scale {
                nisa::dma_copy(quant_scale, sc);
                nisa::reciprocal(quant_scale, quant_scale);
            }
        }
        for i in nl::affine_range(od.div_ceil(OUTER_TILE)) {
            let r0 = i * OUTER_TILE;
            let rows = (od - r0).min(OUTER_TILE);
            let t = nl::ndarray([OUTER_TILE, h], COMPUTE_DTYPE, buffer = nl::sbuf);
            nisa::dma_copy(t[s![0..rows, ..]], x[s![r0..r0 + rows, ..]]);
            if kargs.norm_type == NormType::RMS_NORM {
                rms_normalize_tile(kargs, t, g, rows);
            }
            let q = nl::ndarray([OUTER_TILE, h], QUANT_DTYPE, buffer = nl::sbuf);
            if row_quant {
                let scales = nl::ndarray([OUTER_TILE, 1], nl::float32, buffer = nl::sbuf);
                row_quantize_tile(kargs, t, q, scales, rows);
                nisa::dma_copy(out[s![r0..r0 + rows, 0..h]], q[s![0..rows, ..]]);
                // The fp32 scale column seen as 4 float8 elements per row.
                nisa::dma_copy(
                    out[s![r0..r0 + rows, h..h + DEQUANT_SCALE_SIZE]],
                    scales.ap([[DEQUANT_SCALE_SIZE, rows], [1, DEQUANT_SCALE_SIZE]], dtype = QUANT_DTYPE),
                );
            } else {
                static_quantize_tile(t, quant_scale, q, rows);
                nisa::dma_copy(out[s![r0..r0 + rows, ..]], q[s![0..rows, ..]]);
            }
        }
    }

    /// RMSNorm (optional) and `float8_e4m3` quantization of `hidden` `[B, S, H]`
    /// (or `[OD, H]`) along `H`, with `ln_w` `[H]` or `[1, H]`.
    ///
    /// Row quantization returns `[B, S, H + 4]`: each row's `H` codes, then the
    /// four bytes of its fp32 dequantization scale; static quantization (with
    /// `input_dequant_scale` `[128, 1]`, the dequantization scale on every
    /// partition) returns `[B, S, H]`. `kargs` is the library's
    /// `RmsNormQuantKernelArgs`; a field value the library refuses is refused
    /// naming the field.
    #[nki_kernel]
    pub fn rmsnorm_quant_kernel(
        #[dtypes(float32, bfloat16, float16)] hidden: Hbm,
        #[dtypes(float32, bfloat16, float16)] ln_w: Hbm,
        kargs: RmsNormQuantKernelArgs,
        #[dtypes(float32)] input_dequant_scale: Option<Hbm>,
    ) -> Hbm {
        // The rules of `rmsnorm_quant_violation`, checked when the kernel is traced.
        let quantization_type = kargs.quantization_type;
        assert!(
            quantization_type == QuantizationType::ROW || quantization_type == QuantizationType::STATIC,
            "rmsnorm_quant: kargs.quantization_type must be QuantizationType.ROW or QuantizationType.STATIC (the members implemented), got kargs.quantization_type = {quantization_type}"
        );
        let norm_type = kargs.norm_type;
        assert!(
            norm_type == NormType::NO_NORM || norm_type == NormType::RMS_NORM,
            "rmsnorm_quant: kargs.norm_type must be NormType.NO_NORM or NormType.RMS_NORM (the members implemented), got kargs.norm_type = {norm_type}"
        );
        let (lower_bound, eps) = (kargs.lower_bound, kargs.eps);
        assert!(lower_bound >= 0.0, "rmsnorm_quant: kargs.lower_bound must be non-negative, got kargs.lower_bound = {lower_bound}");
        assert!(eps >= 0.0, "rmsnorm_quant: kargs.eps must be non-negative, got kargs.eps = {eps}");
        let rank = hidden.ndim();
        assert!(rank == 2 || rank == 3, "rmsnorm_quant: hidden must have 2 or 3 dims, got {rank}");
        let shape = hidden.shape();
        let h = shape[rank - 1];
        let od = if rank == 3 { shape[0] * shape[1] } else { shape[0] };
        if rank == 3 {
            assert!(shape[0] <= MAX_B, "rmsnorm_quant: hidden: B = {} exceeds MAX_B = {MAX_B}", shape[0]);
            assert!(shape[1] <= MAX_S, "rmsnorm_quant: hidden: S = {} exceeds MAX_S = {MAX_S}", shape[1]);
        } else {
            assert!(od <= MAX_B * MAX_S, "rmsnorm_quant: hidden: the outer dim {od} exceeds MAX_B * MAX_S = {}", MAX_B * MAX_S);
        }
        assert!(h <= MAX_H, "rmsnorm_quant: hidden: H = {h} exceeds MAX_H = {MAX_H}");
        if norm_type == NormType::RMS_NORM {
            let w_rank = ln_w.ndim();
            assert!(w_rank == 1 || w_rank == 2, "rmsnorm_quant: ln_w must be [H] or [1, H], got rank {w_rank}");
            let w_shape = ln_w.shape();
            assert!(w_shape[w_rank - 1] == h, "rmsnorm_quant: ln_w must have H = {h} elements, got {}", w_shape[w_rank - 1]);
            assert!(w_rank == 1 || w_shape[0] == 1, "rmsnorm_quant: ln_w must be [H] or [1, H], got [{}, {h}]", w_shape[0]);
        }
        if quantization_type == QuantizationType::STATIC {
            assert!(input_dequant_scale.is_some(), "rmsnorm_quant: input_dequant_scale must be given for static quantization");
            if let Some(sc) = input_dequant_scale {
                let sc_shape = sc.shape();
                assert!(
                    sc.ndim() == 2 && sc_shape[0] == OUTER_TILE && sc_shape[1] == 1,
                    "rmsnorm_quant: input_dequant_scale must be broadcast to [128, 1], got {sc_shape}"
                );
            }
        }

        let row_quant = quantization_type == QuantizationType::ROW;
        let out_h = if row_quant { h + DEQUANT_SCALE_SIZE } else { h };
        let out = if rank == 3 {
            nl::ndarray([shape[0], shape[1], out_h], QUANT_DTYPE, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([od, out_h], QUANT_DTYPE, buffer = nl::shared_hbm)
        };
        let x2 = hidden.reshape([od, h]);
        let out2 = out.reshape([od, out_h]);
        let gamma = if norm_type == NormType::RMS_NORM { ln_w.reshape([1, h]) } else { ln_w };

        // With a 1-D launch grid, each program takes a contiguous block of rows,
        // the last one the remainder.
        let grid = nl::program_ndim() == 1;
        let shards = if grid { nl::num_programs(0) } else { 1 };
        let shard = if grid { nl::program_id(0) } else { 0 };
        let nominal = od / shards;
        assert!(nominal > 0, "rmsnorm_quant: hidden: the outer dim {od} is too small to give each of the {shards} programs a row");
        let r0 = shard * nominal;
        let rows = if shard == shards - 1 { od - nominal * (shards - 1) } else { nominal };
        rmsnorm_quant_rows(kargs, x2[s![r0..r0 + rows, ..]], gamma, input_dequant_scale, out2[s![r0..r0 + rows, ..]]);
        out
    }
}
