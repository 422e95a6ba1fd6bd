//! OCP microscaling (MX) on NeuronCore-v4: `quantize_mx` (Vector Engine) and
//! `nc_matmul_mx` (Tensor Engine).
//!
//! A scale group is 8 partitions x 4 free elements: packed value `(p, j)` of an
//! x4 tile holds source elements `(p, 4j..4j+3)` (element k in byte, or nibble,
//! k from the lowest), and the packed values `(8g..8g+7, j)` share the scale at
//! `(g, j)` of the scale tile. Scales stay in the SBUF quadrant their group
//! came from: group `g` is row `32 (g / 4) + g % 4` of the scale tile, so a
//! scale tile of data spanning several quadrants has (nearly) the data's
//! partitions, 4 of each 32 used (the MXFP deep dive's "oversize" layout); a
//! scale tile starts at offset 0, 4, 8 or 12 of its quadrant. A scale is a
//! power of two: its value in `float8_e8m0fnu`, its biased exponent `e + 127`
//! in `uint8`.

use super::elementwise::NameOpts;
use super::exec::{read_tile, read_tile_raw, write_tile, write_tile_raw};
use super::matmul::{accumulation, in_buffer, write_accumulated};
use super::tile::TileView;
use crate::dtype::{fp4_decode, fp8_decode, fp8_encode, round_f32};
use crate::emulator::Ctx;
use crate::profile::Unit;
use crate::tensor::Reach;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

use nki_spec::mx::{GROUP_ELEMENTS, GROUP_PARTITIONS, QUADRANT, QUADRANT_SCALES, SCALE_OFFSETS, scale_partitions, scale_row};

/// The bias of a `uint8` scale's exponent (and of `float8_e8m0fnu`).
const SCALE_BIAS: i32 = 127;

/// The largest unbiased exponent of the element type of an MX dtype (the
/// `quantize_mx` docs' E_max).
fn emax(dtype: Dtype) -> Option<i32> {
    match dtype {
        Dtype::Fp8E4m3Fnx4 => Some(8),
        Dtype::Fp8E5m2x4 => Some(15),
        _ => None,
    }
}

/// Views a scale operand of `groups` x `nf` scales (SBUF, float8_e8m0fnu or
/// uint8) as one `(rows, nf)` piece per quadrant, in group order.
fn scale_tile(op: &'static str, role: &str, t: &Tensor, groups: usize, nf: usize) -> Result<Vec<(Tensor, TileView)>> {
    in_buffer(op, role, t, Buffer::Sbuf)?;
    if !matches!(t.dtype(), Dtype::Fp8E8m0 | Dtype::U8) {
        return Err(NkiError::dtype(op, format!("{role} {} must be float8_e8m0fnu or uint8", t.describe())));
    }
    let v = TileView::of(op, role, t)?;
    let need = scale_partitions(groups);
    if v.nf != nf || v.np < need {
        return Err(NkiError::shape(
            op,
            format!(
                "{role} {} must be at least {need} partitions x {nf} elements (one scale per 8 partitions x 4 elements, kept in \
                 the group's quadrant: group g at row 32 (g / 4) + g % 4), it is {} x {}",
                t.describe(),
                v.np,
                v.nf
            ),
        ));
    }
    if !SCALE_OFFSETS.contains(&(v.p0 % QUADRANT)) {
        return Err(NkiError::constraint(
            op,
            format!("{role} {} starts at partition {}: a scale tile starts at offset 0, 4, 8 or 12 of a quadrant", t.describe(), v.p0),
        ));
    }
    let mut pieces = Vec::new();
    for first in (0..groups).step_by(QUADRANT_SCALES) {
        let row = scale_row(first) as i64;
        let rows = QUADRANT_SCALES.min(groups - first) as i64;
        let piece = t.slice(0, row, row + rows, 1)?;
        let view = TileView::of(op, role, &piece)?;
        pieces.push((piece, view));
    }
    Ok(pieces)
}

/// The unbiased exponents the scale pieces hold (their values are `2^e`), in
/// group order.
fn scale_exponents(pieces: &[(Tensor, TileView)]) -> Vec<i32> {
    let mut out = Vec::new();
    for (t, v) in pieces {
        if t.dtype() == Dtype::U8 {
            out.extend(read_tile(t, v).iter().map(|&b| b as i32 - SCALE_BIAS));
        } else {
            // A NaN scale (0xFF) reads as exponent 128, so its products overflow.
            out.extend(read_tile(t, v).iter().map(|&s| if s.is_nan() { SCALE_BIAS + 1 } else { f64::from(s).log2().round() as i32 }));
        }
    }
    out
}

/// `nisa.quantize_mx(dst, src, dst_scale)`: per group of 8 partitions x 4
/// elements of the fp16/bf16 `src`, the scale `X = 2^(floor(log2(amax)) -
/// (E_max - 1))` (twice the OCP sample algorithm's, as the docs say; `2^-127`
/// for an all-zero group; exponents kept within -127..=127) and the elements
/// `v / X` rounded to nearest even in the x4 element type of `dst`. A group
/// holding NaN gets NaN elements and a NaN (0xFF) scale. trn3 and newer.
pub fn quantize_mx(ctx: &Ctx, dst: &Tensor, src: &Tensor, dst_scale: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.quantize_mx";
    let _ = opts;
    ctx.begin_generation_op(OP)?;
    ctx.record_spec(OP, &[Some(src)], &[Some(dst), Some(dst_scale)])?;
    for (role, t) in [("src", src), ("dst", dst)] {
        in_buffer(OP, role, t, Buffer::Sbuf)?;
    }
    if !matches!(src.dtype(), Dtype::F16 | Dtype::Bf16) {
        return Err(NkiError::dtype(OP, format!("src {} must be float16 or bfloat16", src.describe())));
    }
    let (Some(e_max), Some((Some(elem), _))) = (emax(dst.dtype()), dst.dtype().packs()) else {
        return Err(NkiError::dtype(OP, format!("dst {} must be float8_e5m2_x4 or float8_e4m3fn_x4", dst.describe())));
    };
    let (s, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    if !s.np.is_multiple_of(QUADRANT) || !s.nf.is_multiple_of(GROUP_ELEMENTS) {
        return Err(NkiError::shape(
            OP,
            format!(
                "src {} is {} x {}: it must have a multiple of {QUADRANT} partitions and of {GROUP_ELEMENTS} elements each",
                src.describe(),
                s.np,
                s.nf
            ),
        ));
    }
    let cols = s.nf / GROUP_ELEMENTS;
    if (d.np, d.nf) != (s.np, cols) {
        return Err(NkiError::shape(
            OP,
            format!("dst {} must be {} x {cols} (a quarter of src's free size), it is {} x {}", dst.describe(), s.np, d.np, d.nf),
        ));
    }
    let groups = s.np / GROUP_PARTITIONS;
    let pieces = scale_tile(OP, "dst_scale", dst_scale, groups, cols)?;
    let x = read_tile(src, &s);
    let (mut packed, mut scales) = (vec![0f32; s.np * cols], vec![0f32; groups * cols]);
    for g in 0..groups {
        for j in 0..cols {
            let at = |p: usize, k: usize| f64::from(x[(g * GROUP_PARTITIONS + p) * s.nf + j * GROUP_ELEMENTS + k]);
            let group = (0..GROUP_PARTITIONS).flat_map(|p| (0..GROUP_ELEMENTS).map(move |k| (p, k)));
            let amax = group
                .clone()
                .map(|(p, k)| at(p, k).abs())
                .fold(0.0, |m: f64, v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v) });
            let exp = if amax.is_nan() {
                None
            } else if amax > 0.0 {
                // amax is normal in f64: its floor(log2) is its exponent field.
                Some((((amax.to_bits() >> 52) as i32 - 1023) - (e_max - 1)).clamp(-SCALE_BIAS, SCALE_BIAS))
            } else {
                Some(-SCALE_BIAS)
            };
            let mut codes = [0u32; GROUP_PARTITIONS];
            for (p, k) in group {
                let v = exp.map_or(f32::NAN, |e| (at(p, k) / 2f64.powi(e)) as f32);
                let code = fp8_encode(elem, round_f32(elem, v)).unwrap_or(0);
                codes[p] |= u32::from(code) << (8 * k);
            }
            for (p, c) in codes.into_iter().enumerate() {
                packed[(g * GROUP_PARTITIONS + p) * cols + j] = f32::from_bits(c);
            }
            scales[g * cols + j] = match (exp, dst_scale.dtype()) {
                (Some(e), Dtype::U8) => (e + SCALE_BIAS) as f32,
                (None, Dtype::U8) => 255.0,
                (Some(e), _) => 2f32.powi(e),
                (None, _) => f32::NAN,
            };
        }
    }
    write_tile_raw(dst, &d, &packed);
    for ((t, v), vals) in pieces.iter().zip(scales.chunks(QUADRANT_SCALES * cols)) {
        write_tile(ctx, t, v, vals);
    }
    Ok(())
}

/// Optional arguments of [`nc_matmul_mx`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct NcMatmulMxOpts<'a> {
    /// PE array row tile `(start_row, 0)`; no numeric effect.
    pub tile_position: Option<(i64, i64)>,
    /// PE array row tile size `(rows, 128)`; no numeric effect.
    pub tile_size: Option<(i64, i64)>,
    /// As [`NcMatmulOpts::accumulate`](super::NcMatmulOpts::accumulate).
    pub accumulate: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// The elements of an x4 tile as f32, each times its group's scale `2^e`,
/// as a `[4·np, nf]` row-major matrix: row `4p + k` holds slot `k` of
/// partition `p` (the contraction runs over partitions and slots).
fn dequantized(t: &Tensor, v: &TileView, exps: &[i32]) -> Vec<f32> {
    let (elem, bits) = t.dtype().packs().unwrap_or((None, 4));
    let raw = read_tile_raw(t, v);
    let scales: Vec<f32> = exps.iter().map(|&e| 2f32.powi(e)).collect();
    // Every code's value, decoded once per call rather than once per element.
    let values: Vec<f32> = (0..1u16 << bits)
        .map(|code| match elem {
            Some(e) => fp8_decode(e, code as u8).unwrap_or(f32::NAN),
            None => fp4_decode(code as u8),
        })
        .collect();
    let mut out = vec![0f32; raw.len() * GROUP_ELEMENTS];
    for (i, cell) in raw.iter().enumerate() {
        let (p, m) = (i / v.nf, i % v.nf);
        let scale = scales[(p / GROUP_PARTITIONS) * v.nf + m];
        let word = cell.to_bits();
        for k in 0..GROUP_ELEMENTS {
            let code = (word >> (k as u32 * bits)) & ((1 << bits) - 1);
            out[(p * GROUP_ELEMENTS + k) * v.nf + m] = values[code as usize] * scale;
        }
    }
    out
}

/// `aᵀ · b` for the dequantized `[4·K, m]` and `[4·K, n]` operands with the sum
/// the NumPy executor defines: each group's `8 · 4` rows summed in f64 (exact
/// for e4m3fn and fp4 elements, so in any order), the group sums added in f64
/// in group order, the total rounded once to f32.
fn group_ordered_product(a: &[f32], b: &[f32], m: usize, n: usize) -> Vec<f32> {
    const ROWS: usize = GROUP_PARTITIONS * GROUP_ELEMENTS;
    let mut total = vec![0f64; m * n];
    let mut group = vec![0f64; m * n];
    for (ga, gb) in a.chunks(ROWS * m).zip(b.chunks(ROWS * n)) {
        group.fill(0.0);
        for (ra, rb) in ga.chunks(m).zip(gb.chunks(n)) {
            for (&x, cells) in ra.iter().zip(group.chunks_mut(n)) {
                for (c, &y) in cells.iter_mut().zip(rb) {
                    *c += f64::from(x) * f64::from(y);
                }
            }
        }
        for (t, g) in total.iter_mut().zip(&group) {
            *t += g;
        }
    }
    total.into_iter().map(|v| v as f32).collect()
}

/// `nisa.nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale)`:
/// `dst[m, n] = sum over partitions k and packed slots j of
/// st[k, m, j] 2^es[k / 8, m] * mv[k, n, j] 2^em[k / 8, n]` over the `4 K` rows
/// `4k + j`, summed as [`group_ordered_product`] defines and rounded once to fp32,
/// into PSUM, accumulating as `nc_matmul` does; the tiling arguments have no
/// numeric effect. trn3 and newer.
#[allow(clippy::too_many_arguments)]
pub fn nc_matmul_mx(
    ctx: &Ctx,
    dst: &Tensor,
    stationary: &Tensor,
    moving: &Tensor,
    stationary_scale: &Tensor,
    moving_scale: &Tensor,
    opts: NcMatmulMxOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.nc_matmul_mx";
    ctx.begin_generation_op(OP)?;
    // A scale operand spans the data's partitions, but only 4 rows of each
    // quadrant hold scales: the rows read are checked once they are known.
    ctx.record_partly(OP, Unit::of_spec(OP), (&[stationary, moving], &[stationary_scale, moving_scale]), (&[dst], &[]))?;
    in_buffer(OP, "stationary", stationary, Buffer::Sbuf)?;
    in_buffer(OP, "moving", moving, Buffer::Sbuf)?;
    in_buffer(OP, "dst", dst, Buffer::Psum)?;
    for (role, t) in [("stationary", stationary), ("moving", moving)] {
        if t.dtype().packs().is_none() {
            return Err(NkiError::dtype(
                OP,
                format!("{role} {} must be float8_e5m2_x4, float8_e4m3fn_x4 or float4_e2m1fn_x4", t.describe()),
            ));
        }
    }
    let (st, mv) = (TileView::of(OP, "stationary", stationary)?, TileView::of(OP, "moving", moving)?);
    let dt = TileView::of(OP, "dst", dst)?.on_tensor_engine();
    if st.np != mv.np || !st.np.is_multiple_of(QUADRANT) {
        return Err(NkiError::shape(
            OP,
            format!("stationary and moving must share a partition count that is a multiple of {QUADRANT} (got {} and {})", st.np, mv.np),
        ));
    }
    let hw = ctx.hw();
    if !st.nf.is_multiple_of(2) || st.nf > hw.pmax {
        return Err(NkiError::shape(
            OP,
            format!("stationary {} has free size {}; it must be even and at most {}", stationary.describe(), st.nf, hw.pmax),
        ));
    }
    let limit = match dst.dtype() {
        Dtype::F32 => hw.gemm_moving_fmax,
        Dtype::Bf16 => hw.gemm_moving_fmax_bf16_dst,
        _ => return Err(NkiError::dtype(OP, format!("dst {} must be float32 or bfloat16", dst.describe()))),
    };
    if mv.nf > limit {
        return Err(NkiError::shape(
            OP,
            format!("moving {} has free size {} > {limit}, the limit for a {} dst", moving.describe(), mv.nf, dst.dtype()),
        ));
    }
    if (dt.np, dt.nf) != (st.nf, mv.nf) {
        return Err(NkiError::shape(
            OP,
            format!("dst {} must be {} x {} (stationary free x moving free), it is {} x {}", dst.describe(), st.nf, mv.nf, dt.np, dt.nf),
        ));
    }
    let groups = st.np / GROUP_PARTITIONS;
    let ss = scale_tile(OP, "stationary_scale", stationary_scale, groups, st.nf)?;
    let ms = scale_tile(OP, "moving_scale", moving_scale, groups, mv.nf)?;
    let pieces: Vec<(&Tensor, Reach)> = ss.iter().chain(&ms).map(|(t, _)| (t, Reach::Whole)).collect();
    ctx.check_unwritten_reads(OP, &pieces)?;
    let a = dequantized(stationary, &st, &scale_exponents(&ss));
    let b = dequantized(moving, &mv, &scale_exponents(&ms));
    let out = group_ordered_product(&a, &b, st.nf, mv.nf);
    let state = accumulation(ctx, OP, dst, opts.accumulate)?;
    write_accumulated(ctx, dst, &dt, out, state);
    Ok(())
}
