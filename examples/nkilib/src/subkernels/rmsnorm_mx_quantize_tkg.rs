//! The NKI library's `rmsnorm_mx_quantize_tkg`: an optional residual add, the
//! RMSNorm of decode-phase hidden states `[B, S, H]` and their MXFP8
//! quantization, fused, for the MX experts of `moe_block_tkg`.
//!
//! Each token row `x` (or `x + residual`) becomes
//! `y = x·gamma / sqrt(Σx² / N + eps)`, `N` being `hidden_actual` when the row
//! is zero-padded and `H` otherwise. `y` is written in the `hidden_dim_tp` layout `[128, B·S, H/128]`
//! (row `t`'s element `h = c·128 + p` at `[p, t, c]`), and quantized by
//! `quantize_mx` into `float8_e4m3fn_x4` words `[128, H/512, B·S]` with their
//! `uint8` block scales: word `[p, j, t]` packs the elements of columns
//! `q·H/512 + j`, `q = 0..4` (the swizzle below), so each 512-wide tile `j`
//! holds four column groups of the layout.
//!
//! ```text
//! (LNC2 only) program i takes the rows [i·BxS/2, (i+1)·BxS/2)
//! gamma -> g [128, H1]                                  # gamma's dtype
//! for each tile of TS rows (TS = get_token_tile_size(BxS/2)):
//!     x = load rows in the layout   [128, TS, H1]       # input dtype
//!     (residual) r = load rows; r = x + r; x = r        # residual dtype, kept
//!     sq = square(x)                [128, TS, H1]       # fp32
//!     x  = x · g                                        # input dtype
//!     ss = onesᵀ @ Σ_H1 sq          [128, TS]           # PSUM: Σ over partitions
//!     rr = rsqrt(ss / N + eps)                          # fp32
//!     output[:, rows] = x · rr                          # output dtype
//!     sw[:, j, :, q] = output[:, rows, q·H/512 + j]     # swizzle per 512 tile
//!     output_quant, output_scale[:, j, rows] = quantize_mx(sw[:, j])
//! exchange the rows of output, output_quant, output_scale  # sendrecv
//! (residual) output_residual[rows] = r                  # [B·S, H] on HBM
//! ```
//!
//! `output`, `output_quant` and `output_scale` are SBUF tiles the caller
//! allocates; after the exchange both programs hold every row of them. The
//! library's call takes `input, gamma, output, output_quant, output_scale,
//! residual=None, output_residual=None, eps=1e-6, hidden_actual=None,
//! hidden_dim_tp=True`; here every argument is given. Its loads are DMA
//! transposes and its residual spill goes through PE transposes; here both are
//! strided DMAs of the same layout, which move the same values. The rules are
//! [`rmsnorm_mx_quantize_violation`]'s, asserted when the call is traced.

use nki::prelude::*;

pub use kernel::*;

/// Why an `rmsnorm_mx_quantize_tkg` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmsNormMxRule {
    /// `H` is not a multiple of 512 (one MX tile of four 128-row groups).
    HiddenTiles,
    /// The launch is not two programs (the kernel splits the rows over LNC2).
    NeedsLnc2,
    /// `B·S` is not a positive multiple of 4.
    Tokens,
    /// `hidden_dim_tp` is off: only the `h = c·128 + p` layout is quantized.
    HiddenDimTp,
    /// `output` is not float16 or bfloat16 (what `quantize_mx` reads).
    OutputDtype,
    /// `hidden_actual` is outside `1..=H`.
    HiddenActual,
    /// `eps` is negative or not finite.
    Eps,
    /// A residual without `output_residual`, or the other way round.
    ResidualPair,
    /// The residual add with `H/128` not a multiple of 8 or fewer than 256 rows.
    ResidualSizes,
}

impl RmsNormMxRule {
    /// The rule in words (the call's asserts say the same constant).
    pub const fn message(self) -> &'static str {
        match self {
            RmsNormMxRule::HiddenTiles => rules::HIDDEN_TILES,
            RmsNormMxRule::NeedsLnc2 => rules::NEEDS_LNC2,
            RmsNormMxRule::Tokens => rules::TOKENS,
            RmsNormMxRule::HiddenDimTp => rules::HIDDEN_DIM_TP,
            RmsNormMxRule::OutputDtype => rules::OUTPUT_DTYPE,
            RmsNormMxRule::HiddenActual => rules::HIDDEN_ACTUAL,
            RmsNormMxRule::Eps => rules::EPS,
            RmsNormMxRule::ResidualPair => rules::RESIDUAL_PAIR,
            RmsNormMxRule::ResidualSizes => rules::RESIDUAL_SIZES,
        }
    }
}

/// One message per rule, named by the call's asserts.
#[nki_module]
pub mod rules {
    /// `RmsNormMxRule::HiddenTiles`.
    pub const HIDDEN_TILES: &str = "rmsnorm_mx_quantize_tkg: H must be a positive multiple of 512";
    /// `RmsNormMxRule::NeedsLnc2`.
    pub const NEEDS_LNC2: &str = "rmsnorm_mx_quantize_tkg: needs a launch of 2 programs (LNC2)";
    /// `RmsNormMxRule::Tokens`.
    pub const TOKENS: &str = "rmsnorm_mx_quantize_tkg: B * S must be a positive multiple of 4";
    /// `RmsNormMxRule::HiddenDimTp`.
    pub const HIDDEN_DIM_TP: &str = "rmsnorm_mx_quantize_tkg: only hidden_dim_tp = True is supported";
    /// `RmsNormMxRule::OutputDtype`.
    pub const OUTPUT_DTYPE: &str = "rmsnorm_mx_quantize_tkg: output must be float16 or bfloat16";
    /// `RmsNormMxRule::HiddenActual`.
    pub const HIDDEN_ACTUAL: &str = "rmsnorm_mx_quantize_tkg: hidden_actual must be in 1..=H";
    /// `RmsNormMxRule::Eps`.
    pub const EPS: &str = "rmsnorm_mx_quantize_tkg: eps must be finite and non-negative";
    /// `RmsNormMxRule::ResidualPair`.
    pub const RESIDUAL_PAIR: &str = "rmsnorm_mx_quantize_tkg: residual and output_residual go together";
    /// `RmsNormMxRule::ResidualSizes`.
    pub const RESIDUAL_SIZES: &str = "rmsnorm_mx_quantize_tkg: the residual add needs H / 128 a multiple of 8 and B * S >= 256";
}

/// An `rmsnorm_mx_quantize_tkg` call as its rules read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsNormMxShape {
    /// `B · S`, the token rows.
    pub bxs: i64,
    /// `H`, the (padded) hidden size.
    pub hidden: i64,
    /// `hidden_actual`.
    pub hidden_actual: i64,
    /// `eps`.
    pub eps: f64,
    /// `hidden_dim_tp`.
    pub hidden_dim_tp: bool,
    /// Whether `output` is float16 or bfloat16.
    pub output_16bit: bool,
    /// Whether `residual` is given.
    pub residual: bool,
    /// Whether `output_residual` is given.
    pub output_residual: bool,
    /// The programs of the launch.
    pub programs: i64,
}

/// The first rule `c` breaks, if any.
pub const fn rmsnorm_mx_quantize_violation(c: RmsNormMxShape) -> Option<RmsNormMxRule> {
    if c.hidden <= 0 || c.hidden % kernel::H_PER_MX_TILE != 0 {
        Some(RmsNormMxRule::HiddenTiles)
    } else if c.programs != 2 {
        Some(RmsNormMxRule::NeedsLnc2)
    } else if c.bxs <= 0 || c.bxs % kernel::TOKEN_MULTIPLE != 0 {
        Some(RmsNormMxRule::Tokens)
    } else if !c.hidden_dim_tp {
        Some(RmsNormMxRule::HiddenDimTp)
    } else if !c.output_16bit {
        Some(RmsNormMxRule::OutputDtype)
    } else if c.hidden_actual < 1 || c.hidden_actual > c.hidden {
        Some(RmsNormMxRule::HiddenActual)
    } else if !(c.eps >= 0.0 && c.eps < f64::INFINITY) {
        Some(RmsNormMxRule::Eps)
    } else if c.residual != c.output_residual {
        Some(RmsNormMxRule::ResidualPair)
    } else if c.residual && ((c.hidden / kernel::H0) % kernel::RESIDUAL_H1_MULTIPLE != 0 || c.bxs < kernel::RESIDUAL_MIN_TOKENS) {
        Some(RmsNormMxRule::ResidualSizes)
    } else {
        None
    }
}

/// The call, its tile constants and phase helpers.
#[nki_module]
pub mod kernel {
    use crate::subkernels::norm_tkg_utils::{INTER_DTYPE, load_gamma_to_sbuf, load_input_to_sbuf};
    use crate::utils::kernel_helpers::check_hidden_row;
    use nki::prelude::*;

    /// Partitions: the hidden dim is laid out as `H1` columns of 128 rows.
    pub const H0: i64 = 128;
    /// Values one `float8_e4m3fn_x4` word packs, the column groups of a 512 tile.
    pub const Q_WIDTH: i64 = 4;
    /// Hidden values of one MX tile (`Q_WIDTH` groups of `H0`).
    pub const H_PER_MX_TILE: i64 = 512;
    /// `B·S` is a multiple of this: each of the two programs' shares splits
    /// evenly (the library's LNC2 alignment).
    pub const TOKEN_MULTIPLE: i64 = 4;
    /// With the residual add, `H / 128` is a multiple of this and `B·S` at
    /// least [`RESIDUAL_MIN_TOKENS`] (the library's residual spill transposes
    /// whole 128-token tiles of each program's share).
    pub const RESIDUAL_H1_MULTIPLE: i64 = 8;
    /// See [`RESIDUAL_H1_MULTIPLE`].
    pub const RESIDUAL_MIN_TOKENS: i64 = 256;
    /// The largest and smallest power-of-two token tile the rows are cut into.
    pub const MAX_TOKEN_TILE: i64 = 64;
    /// See [`MAX_TOKEN_TILE`].
    pub const MIN_TOKEN_TILE: i64 = 8;
    /// The exchange's pipes: the normalised rows, their MX words, their scales.
    pub const PIPE_OUTPUT: i64 = 0;
    /// See [`PIPE_OUTPUT`].
    pub const PIPE_QUANT: i64 = 1;
    /// See [`PIPE_OUTPUT`].
    pub const PIPE_SCALE: i64 = 2;

    /// The largest power of two from `MAX_TOKEN_TILE` down to
    /// `MIN_TOKEN_TILE` dividing `tokens`, else `tokens` (one tile).
    #[nki_helper]
    pub fn get_token_tile_size(tokens: i64) -> i64 {
        if tokens % MAX_TOKEN_TILE == 0 {
            MAX_TOKEN_TILE
        } else if tokens % 32 == 0 {
            32
        } else if tokens % 16 == 0 {
            16
        } else if tokens % MIN_TOKEN_TILE == 0 {
            MIN_TOKEN_TILE
        } else {
            tokens
        }
    }

    /// The tiles every row tile reads and the program's rows.
    #[nki_object]
    pub struct RmsNormMxConsts {
        /// Gamma `[128, 1, H1]` in the layout.
        pub gamma: Tensor,
        /// Zero on every partition `[128, 1]`: the squares' bias.
        pub zero: Tensor,
        /// `eps` on every partition `[128, 1]`.
        pub eps: Tensor,
        /// Ones `[128, 128]`: `onesᵀ @ s` sums `s` over the partitions onto each.
        pub ones: Tensor,
        /// The count the mean square divides by.
        pub hidden_actual: i64,
        /// The first row of this program's share.
        pub row0: i64,
    }

    /// Normalises the row tile `x` `[128, ts, H1]` (already times gamma when
    /// `squares` holds its squares) into `output` rows `r0..r0 + ts`.
    #[nki_helper]
    pub fn normalize_tile(consts: RmsNormMxConsts, x: Sbuf, squares: Sbuf, output: Sbuf, r0: i64) {
        let [_, ts, h1] = x.shape();
        let reduced = nl::ndarray([H0, ts], INTER_DTYPE, buffer = nl::sbuf);
        nisa::tensor_reduce(reduced, nl::add, squares, 2);
        let total = nl::ndarray([H0, ts], nl::float32, buffer = nl::psum);
        nisa::nc_matmul(total, consts.ones, reduced);
        let rrms = nl::ndarray([H0, ts, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::activation(rrms.reshape([H0, ts]), nl::rsqrt, total, bias = consts.eps, scale = 1.0 / consts.hidden_actual as f64);
        nisa::tensor_tensor(output[s![.., r0..r0 + ts, ..]], x, rrms.broadcast(2, h1), nl::multiply);
    }

    /// Quantizes `output` rows `r0..r0 + ts` to MX: the rows swizzled so each
    /// 512 tile's four column groups sit side by side, then one `quantize_mx`
    /// per tile.
    #[nki_helper(target = "trn3")]
    pub fn quantize_tile(output: Sbuf, output_quant: Sbuf, output_scale: Sbuf, r0: i64, ts: i64) {
        let tiles = output_quant.shape()[1];
        let swizzled = nl::ndarray([H0, tiles, ts, Q_WIDTH], output.dtype(), buffer = nl::sbuf);
        for j in nl::affine_range(tiles) {
            for q in nl::affine_range(Q_WIDTH) {
                nisa::tensor_copy(swizzled[s![.., j, .., q]], output[s![.., r0..r0 + ts, q * tiles + j]]);
            }
        }
        for j in nl::sequential_range(tiles) {
            nisa::quantize_mx(
                output_quant[s![.., j..j + 1, r0..r0 + ts]],
                swizzled[s![.., j..j + 1, .., ..]],
                output_scale[s![.., j..j + 1, r0..r0 + ts]],
            );
        }
    }

    /// Sends this program's rows of the three outputs to the other program and
    /// receives its rows, so both hold every row.
    #[nki_helper]
    pub fn exchange_rows(output: Sbuf, output_quant: Sbuf, output_scale: Sbuf, row0: i64, share: i64) {
        let other = 1 - nl::program_id(0);
        let theirs = other * share;
        nisa::sendrecv(output[s![.., row0..row0 + share, ..]], output[s![.., theirs..theirs + share, ..]], other, other, PIPE_OUTPUT);
        nisa::sendrecv(
            output_quant[s![.., .., row0..row0 + share]],
            output_quant[s![.., .., theirs..theirs + share]],
            other,
            other,
            PIPE_QUANT,
        );
        nisa::sendrecv(
            output_scale[s![.., .., row0..row0 + share]],
            output_scale[s![.., .., theirs..theirs + share]],
            other,
            other,
            PIPE_SCALE,
        );
    }

    /// Loads row tile `i` (`ts` rows from `r0`) into `x`, adds the residual
    /// into `kept` when there is one (the sum replaces `x`), writes the
    /// squares into `squares` and leaves `x · gamma` in `x`.
    #[nki_helper]
    pub fn load_tile(consts: RmsNormMxConsts, x2d: Hbm, residual: Option<Hbm>, kept: Option<Sbuf>, x: Sbuf, squares: Sbuf, i: i64) {
        let [_, ts, _] = x.shape();
        let r0 = consts.row0 + i * ts;
        let g = consts.gamma.broadcast(1, ts);
        load_input_to_sbuf(x2d, x, r0, ts, 1, 0, 1, true);
        if let Some(res) = residual {
            if let Some(sums) = kept {
                let sum = sums[s![.., i * ts..(i + 1) * ts, ..]];
                load_input_to_sbuf(res.reshape(x2d.shape()), sum, r0, ts, 1, 0, 1, true);
                nisa::tensor_tensor(sum, x, sum, nl::add);
                nisa::activation(squares, nl::square, sum, bias = consts.zero);
                nisa::tensor_tensor(x, sum, g, nl::multiply);
            }
        } else {
            nisa::activation(squares, nl::square, x, bias = consts.zero);
            nisa::tensor_tensor(x, x, g, nl::multiply);
        }
    }

    /// This program's rows, tile by tile: load (and add the residual),
    /// normalise into `output`, quantize into `output_quant` and `output_scale`.
    #[nki_helper(target = "trn3")]
    pub fn rmsnorm_mx_tiles(
        consts: RmsNormMxConsts,
        x2d: Hbm,
        residual: Option<Hbm>,
        kept: Option<Sbuf>,
        output: Sbuf,
        output_quant: Sbuf,
        output_scale: Sbuf,
    ) {
        let h1 = output.shape()[2];
        let share = output.shape()[1] / 2;
        let ts: i64 = get_token_tile_size(share);
        for i in nl::sequential_range(share / ts) {
            let x = nl::ndarray([H0, ts, h1], x2d.dtype(), buffer = nl::sbuf);
            let squares = nl::ndarray([H0, ts, h1], INTER_DTYPE, buffer = nl::sbuf);
            load_tile(consts, x2d, residual, kept, x, squares, i);
            let r0 = consts.row0 + i * ts;
            normalize_tile(consts, x, squares, output, r0);
            quantize_tile(output, output_quant, output_scale, r0, ts);
        }
    }

    /// Asserts the rules of [`rmsnorm_mx_quantize_violation`](super::rmsnorm_mx_quantize_violation)
    /// and the tiles' shapes.
    #[nki_helper]
    pub fn validate_shapes_quantize_mx(
        input: Hbm,
        gamma: Hbm,
        output: Sbuf,
        residual: Option<Hbm>,
        output_residual: Option<Hbm>,
        eps: f64,
        hidden_actual: i64,
        hidden_dim_tp: bool,
    ) {
        let [b, sl, h] = input.shape();
        let bxs = b * sl;
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let out_dtype = output.dtype();
        assert!(h > 0 && h % H_PER_MX_TILE == 0, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::HIDDEN_TILES);
        assert!(programs == 2, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::NEEDS_LNC2);
        assert!(bxs > 0 && bxs % TOKEN_MULTIPLE == 0, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::TOKENS);
        assert!(hidden_dim_tp, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::HIDDEN_DIM_TP);
        assert!(out_dtype == nl::float16 || out_dtype == nl::bfloat16, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::OUTPUT_DTYPE);
        assert!(1 <= hidden_actual && hidden_actual <= h, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::HIDDEN_ACTUAL);
        assert!(eps >= 0.0 && eps < f64::INFINITY, crate::subkernels::rmsnorm_mx_quantize_tkg::rules::EPS);
        assert!(residual.is_some() == output_residual.is_some(), crate::subkernels::rmsnorm_mx_quantize_tkg::rules::RESIDUAL_PAIR);
        assert!(
            residual.is_none() || ((h / H0) % RESIDUAL_H1_MULTIPLE == 0 && bxs >= RESIDUAL_MIN_TOKENS),
            crate::subkernels::rmsnorm_mx_quantize_tkg::rules::RESIDUAL_SIZES
        );
        let h1 = h / H0;
        let o_shape = output.shape();
        assert!(
            output.ndim() == 3 && o_shape[0] == H0 && o_shape[1] == bxs && o_shape[2] == h1,
            "rmsnorm_mx_quantize_tkg: output must be [128, B*S, H/128] = [128, {bxs}, {h1}], got {o_shape}"
        );
        check_hidden_row(Some(gamma), "rmsnorm_mx_quantize_tkg", "gamma", h);
    }

    /// Fused residual add (when `residual` is given), RMSNorm and MX
    /// quantization of `input` `[B, S, H]` with `gamma` `[1, H]`: `output`
    /// `[128, B·S, H/128]`, `output_quant` `[128, H/512, B·S]`
    /// (`float8_e4m3fn_x4`) and `output_scale` (`uint8`, same shape) are SBUF
    /// tiles; `output_residual` `[B·S, H]` (HBM) receives `input + residual`.
    #[nki_helper(target = "trn3")]
    pub fn rmsnorm_mx_quantize_tkg(
        input: Hbm,
        gamma: Hbm,
        output: Sbuf,
        output_quant: Sbuf,
        output_scale: Sbuf,
        residual: Option<Hbm>,
        output_residual: Option<Hbm>,
        eps: f64,
        hidden_actual: Option<i64>,
        hidden_dim_tp: bool,
    ) {
        let [b, sl, h] = input.shape();
        let ha = hidden_actual.unwrap_or(h);
        validate_shapes_quantize_mx(input, gamma, output, residual, output_residual, eps, ha, hidden_dim_tp);
        let (bxs, h1) = (b * sl, h / H0);
        let share = bxs / 2;
        let row0 = nl::program_id(0) * share;
        let eps_sb = nl::ndarray([H0, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(eps_sb, eps);
        let zero = nl::ndarray([H0, 1], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(zero, 0.0);
        let ones = nl::ndarray([H0, H0], INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(ones, 1.0);
        let gamma_sb = load_gamma_to_sbuf(gamma, h1, 1, 0, 1, true);
        let consts = RmsNormMxConsts { gamma: gamma_sb, zero, eps: eps_sb, ones, hidden_actual: ha, row0 };
        let x2d = input.reshape([bxs, h]);
        if let Some(res) = residual {
            // The residual sums stay on chip for the spill after the exchange.
            let kept = nl::ndarray([H0, share, h1], res.dtype(), buffer = nl::sbuf);
            rmsnorm_mx_tiles(consts, x2d, Some(res), Some(kept), output, output_quant, output_scale);
            exchange_rows(output, output_quant, output_scale, row0, share);
            if let Some(out_res) = output_residual {
                nisa::dma_copy(out_res.ap([[1, H0], [h, share], [H0, h1]], offset = row0 * h), kept);
            }
        } else {
            rmsnorm_mx_tiles(consts, x2d, None, None, output, output_quant, output_scale);
            exchange_rows(output, output_quant, output_scale, row0, share);
        }
    }
}
