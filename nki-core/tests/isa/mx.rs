//! `quantize_mx` and `nc_matmul_mx` against float64 references written from
//! their docs: per group of 8 partitions x 4 elements, the scale
//! `2^(floor(log2(amax)) - (E_max - 1))` and the elements `v / scale` rounded to
//! nearest even in the element format (decoded here from the OCP bit layouts);
//! the matmul sums dequantized products over partitions and packed slots.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, NameOpts, NcMatmulMxOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Tensor, s};

fn trn3() -> Launch {
    launch(Precision::Hardware).generation(Generation::Trn3)
}

/// An OCP float format: mantissa bits, exponent bias, exponent bits.
#[derive(Clone, Copy)]
struct Format {
    man: i32,
    bias: i32,
    exp_bits: u32,
}

const E4M3FN: Format = Format { man: 3, bias: 7, exp_bits: 4 };
const E5M2: Format = Format { man: 2, bias: 15, exp_bits: 5 };
const E2M1: Format = Format { man: 1, bias: 1, exp_bits: 2 };

/// The value of `code` in `f` (the tests' data hold no NaN or infinity codes).
fn decode(f: Format, code: u32) -> f64 {
    let width = f.exp_bits + f.man as u32;
    let sign = if (code >> width) & 1 == 1 { -1.0 } else { 1.0 };
    let e = ((code >> f.man) & ((1 << f.exp_bits) - 1)) as i32;
    let m = f64::from(code & ((1 << f.man) - 1)) / f64::from(1 << f.man);
    if e == 0 { sign * m * 2f64.powi(1 - f.bias) } else { sign * (1.0 + m) * 2f64.powi(e - f.bias) }
}

/// `y` rounded to nearest even in `f` (the scales keep these tests clear of overflow).
fn round_to(f: Format, y: f64) -> f64 {
    if y == 0.0 {
        return 0.0;
    }
    let e = y.abs().log2().floor().max(f64::from(1 - f.bias));
    let q = 2f64.powf(e - f64::from(f.man));
    (y / q).round_ties_even() * q
}

/// The x4 tile's elements decoded: `[p][j][k]` row-major.
fn unpack(t: &Tensor, f: Format) -> Vec<f64> {
    let bits = (f.exp_bits + f.man as u32 + 1) as i64;
    t.to_i64_vec().iter().flat_map(|&w| (0..4).map(move |k| decode(f, ((w >> (k * bits)) & ((1 << bits) - 1)) as u32))).collect()
}

/// The scale-tile row of group `g` (the MXFP deep dive: scales stay in their
/// group's 32-partition quadrant, 4 rows at its start).
fn row(g: usize) -> usize {
    32 * (g / 4) + g % 4
}

/// The partitions of a scale tile for `p` data partitions: `p / 8` within
/// one quadrant, else the data's own count ("oversize").
fn scale_rows(p: usize) -> usize {
    if p > 32 { p } else { p / 8 }
}

/// `vals` (`groups` rows of `cols`) spread over a scale tile's rows, the
/// unused rows holding `fill`.
fn spread(vals: &[i64], groups: usize, cols: usize, fill: i64) -> Vec<i64> {
    let mut out = vec![fill; scale_rows(groups * 8) * cols];
    for g in 0..groups {
        out[row(g) * cols..(row(g) + 1) * cols].copy_from_slice(&vals[g * cols..(g + 1) * cols]);
    }
    out
}

/// An SBUF tile of `shape` (2-D) and the packed `dtype` holding the raw words
/// `vals`, copied in from HBM.
fn sbuf_words(ctx: &Ctx, shape: &[usize], vals: &[i64], dtype: Dtype) -> nki_core::Result<Tensor> {
    let t = alloc(ctx, &[shape[0] as i64, shape[1] as i64], dtype, Buffer::Sbuf)?;
    nisa::dma_copy(ctx, &t, &Tensor::from_i64(shape, vals, dtype)?, Default::default())?;
    Ok(t)
}

/// Runs `quantize_mx` on a `[p, f]` bf16 tile of `x`; returns (dst, scale) tensors.
fn quantize(x: &[f64], p: usize, f: usize, dst: Dtype, scale: Dtype) -> nki_core::Result<(Tensor, Tensor)> {
    trn3().run(|ctx| {
        let s = sbuf_with(ctx, &[p as i64, f as i64], Dtype::Bf16, x)?;
        let d = alloc(ctx, &[p as i64, (f / 4) as i64], dst, Buffer::Sbuf)?;
        let e = alloc(ctx, &[scale_rows(p) as i64, (f / 4) as i64], scale, Buffer::Sbuf)?;
        nisa::quantize_mx(ctx, &d, &s, &e, NameOpts::default())?;
        Ok((d.clone(), e.clone()))
    })
}

#[test]
fn quantize_mx_scales_each_group_and_rounds_its_elements_to_nearest_even() {
    let (p, f) = (128usize, 16usize);
    // Groups of very different magnitudes; one all-zero group.
    let mut x: Vec<f64> = uniform(p * f, 41, -1.0, 1.0)
        .iter()
        .enumerate()
        .map(|(i, v)| f64::from(bf16((v * 2f64.powi((i % 16 + i / 1024) as i32 - 6)) as f32)))
        .collect();
    for pp in 8..16 {
        for k in 0..4 {
            x[pp * f + k] = 0.0;
        }
    }
    for (dst, fmt, e_max) in [(Dtype::Fp8E4m3Fnx4, E4M3FN, 8), (Dtype::Fp8E5m2x4, E5M2, 15)] {
        for scale_dtype in [Dtype::Fp8E8m0, Dtype::U8] {
            let (d, e) = quantize(&x, p, f, dst, scale_dtype).unwrap();
            let (got, scales) = (unpack(&d, fmt), e.to_f32_vec());
            for g in 0..p / 8 {
                for j in 0..f / 4 {
                    let members: Vec<(usize, usize)> = (0..8).flat_map(|pp| (0..4).map(move |k| (g * 8 + pp, j * 4 + k))).collect();
                    let amax = members.iter().map(|&(r, c)| x[r * f + c].abs()).fold(0.0, f64::max);
                    let exp = if amax > 0.0 { amax.log2().floor() as i32 - (e_max - 1) } else { -127 };
                    let scale = f64::from(scales[row(g) * (f / 4) + j]);
                    let stored = if scale_dtype == Dtype::U8 { 2f64.powf(scale - 127.0) } else { scale };
                    assert_eq!(stored, 2f64.powi(exp), "{dst} group ({g}, {j})");
                    for &(r, c) in &members {
                        let want = round_to(fmt, x[r * f + c] / 2f64.powi(exp));
                        assert_eq!(got[r * f + c], want, "{dst} element ({r}, {c}) = {}", x[r * f + c]);
                    }
                }
            }
        }
    }
}

#[test]
fn nc_matmul_mx_sums_dequantized_products_and_accumulates() {
    let (k, m, n) = (64usize, 16usize, 24usize);
    // Random codes: e4m3fn without its NaN codes 0x7f and 0xff, fp4 any nibble.
    let codes = |len: usize, seed: u64, bits: u32| -> Vec<u32> {
        let raw = uniform(len, seed, 0.0, 1.0);
        if bits == 4 {
            return raw.iter().map(|v| (v * 16.0) as u32).collect();
        }
        raw.iter().map(|v| (v * 254.0) as u32).map(|c| if c >= 0x7f { c + 1 } else { c }).collect()
    };
    let pack = |c: &[u32], bits: u32| -> Vec<i64> {
        c.chunks(4).map(|w| w.iter().enumerate().map(|(i, &x)| i64::from(x) << (i as u32 * bits)).sum()).collect()
    };
    let st_codes = codes(k * m * 4, 51, 8);
    let mv_codes = codes(k * n * 4, 52, 4);
    let st_exp: Vec<i64> = uniform(k / 8 * m, 53, -3.0, 3.0).iter().map(|v| v.floor() as i64 + 127).collect();
    let mv_exp: Vec<i64> = uniform(k / 8 * n, 54, -3.0, 3.0).iter().map(|v| v.floor() as i64 + 127).collect();
    let want: Vec<f64> = (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            (0..k)
                .flat_map(|kk| (0..4).map(move |j| (kk, j)))
                .map(|(kk, j)| {
                    let a = decode(E4M3FN, st_codes[(kk * m + r) * 4 + j]) * 2f64.powi(st_exp[kk / 8 * m + r] as i32 - 127);
                    let b = decode(E2M1, mv_codes[(kk * n + c) * 4 + j]) * 2f64.powi(mv_exp[kk / 8 * n + c] as i32 - 127);
                    a * b
                })
                .sum()
        })
        .collect();
    let got = trn3()
        .run(|ctx| {
            let st = sbuf_words(ctx, &[k, m], &pack(&st_codes, 8), Dtype::Fp8E4m3Fnx4)?;
            let mv = sbuf_words(ctx, &[k, n], &pack(&mv_codes, 4), Dtype::Fp4E2m1Fnx4)?;
            // Unused scale rows hold 2^100, which a misread would show.
            let ss = sbuf_words(ctx, &[scale_rows(k), m], &spread(&st_exp, k / 8, m, 227), Dtype::U8)?;
            let ms = sbuf_words(ctx, &[scale_rows(k), n], &spread(&mv_exp, k / 8, n, 227), Dtype::U8)?;
            let d = alloc(ctx, &[m as i64, n as i64], Dtype::F32, Buffer::Psum)?;
            nisa::nc_matmul_mx(ctx, &d, &st, &mv, &ss, &ms, NcMatmulMxOpts::default())?;
            let once = d.to_f32_vec();
            nisa::nc_matmul_mx(ctx, &d, &st, &mv, &ss, &ms, NcMatmulMxOpts { accumulate: Some(true), ..Default::default() })?;
            Ok((once, d.to_f32_vec()))
        })
        .unwrap();
    assert_close(&got.0, &want, 1e-5, 1e-6);
    assert_close(&got.1, &want.iter().map(|w| 2.0 * w).collect::<Vec<_>>(), 1e-5, 1e-6);
}

/// A scale operand spans the data's partitions, but only 4 rows of each
/// quadrant hold scales: a matmul whose scale tiles have just those rows
/// written reads nothing unwritten (strict mode passes); one whose scale row
/// 35 (group 7) is unwritten reports that row and no other.
#[test]
fn nc_matmul_mx_reads_only_the_scale_rows_of_its_scale_tiles() {
    let (k, m) = (64usize, 4usize);
    let run = |write_group_7: bool| {
        trn3().strict_uninit(true).run(move |ctx| {
            let zeros = |p: usize, dtype: Dtype| -> nki_core::Result<Tensor> {
                let t = alloc(ctx, &[p as i64, m as i64], dtype, Buffer::Sbuf)?;
                nisa::dma_copy(ctx, &t, &Tensor::from_i64(&[p, m], &vec![0; p * m], dtype)?, Default::default())?;
                Ok(t)
            };
            let data = zeros(k, Dtype::Fp8E4m3Fnx4)?;
            let scales = alloc(ctx, &[k as i64, m as i64], Dtype::U8, Buffer::Sbuf)?;
            let ones = Tensor::from_i64(&[4, m], &[127; 16], Dtype::U8)?;
            let last = if write_group_7 { 36 } else { 35 };
            nisa::dma_copy(ctx, &scales.index(&s![0..4, ..])?, &ones, Default::default())?;
            nisa::dma_copy(ctx, &scales.index(&s![32..last, ..])?, &ones.index(&s![0..last - 32, ..])?, Default::default())?;
            let d = alloc(ctx, &[m as i64, m as i64], Dtype::F32, Buffer::Psum)?;
            nisa::nc_matmul_mx(ctx, &d, &data, &data, &scales, &scales, NcMatmulMxOpts::default())
        })
    };
    run(true).unwrap();
    let e = run(false).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Undefined, "{e}");
    assert!(e.to_string().contains("reads 4 elements of 'tensor' [64, 4] uint8 in SBUF"), "{e}");
    assert!(e.to_string().contains("(the first at [35, 0])"), "{e}");
}

/// The sum is defined: a group's 32 products exactly, the group sums added in
/// f64 in group order, rounded once to f32. Each nonzero cell here comes out
/// differently under a plain f32 running sum (0, 0 and 0 for the first two)
/// or under other group orders (the third).
#[test]
fn nc_matmul_mx_sums_each_group_exactly_then_the_groups_in_f64_in_order() {
    let (k, m, n) = (32usize, 2usize, 4usize);
    let (mut st, mut mv) = (vec![0u32; k * m * 4], vec![0u32; k * n * 4]);
    let at = |p: usize, col: usize, cols: usize, j: usize| (p * cols + col) * 4 + j;
    // Cell (0, 0), group 0: 448·448 + 2^-9·2^-9 - 448·448 = 2^-18.
    for (j, (a, b)) in [(0x7e, 0x7e), (0x01, 0x01), (0x7e, 0xfe)].into_iter().enumerate() {
        (st[at(0, 0, m, j)], mv[at(0, 0, n, j)]) = (a, b);
    }
    // Column 1 of st and columns 1, 2 of mv: ±1 at the first row of groups 1, 2, 3.
    for g in 1..4 {
        st[at(8 * g, 1, m, 0)] = 0x38;
        let one = if g == 3 { 0xb8 } else { 0x38 };
        (mv[at(8 * g, 1, n, 0)], mv[at(8 * g, 2, n, 0)]) = (one, one);
    }
    // Scales 2^30 on groups 1 and 3 of st column 1 and mv column 2: cell (1, 1)
    // is 2^30 + 1 - 2^30 = 1; cell (1, 2) is 2^60 + 1 - 2^60, 0 in f64 in order.
    let (mut st_exp, mut mv_exp) = (vec![127i64; 4 * m], vec![127i64; 4 * n]);
    for g in [1, 3] {
        (st_exp[g * m + 1], mv_exp[g * n + 2]) = (157, 157);
    }
    let pack = |c: &[u32]| -> Vec<i64> { c.chunks(4).map(|w| w.iter().enumerate().map(|(i, &x)| i64::from(x) << (8 * i)).sum()).collect() };
    let got = trn3()
        .run(|ctx| {
            let (a, b) =
                (sbuf_words(ctx, &[k, m], &pack(&st), Dtype::Fp8E4m3Fnx4)?, sbuf_words(ctx, &[k, n], &pack(&mv), Dtype::Fp8E4m3Fnx4)?);
            let ss = sbuf_words(ctx, &[scale_rows(k), m], &spread(&st_exp, 4, m, 127), Dtype::U8)?;
            let ms = sbuf_words(ctx, &[scale_rows(k), n], &spread(&mv_exp, 4, n, 127), Dtype::U8)?;
            let d = alloc(ctx, &[m as i64, n as i64], Dtype::F32, Buffer::Psum)?;
            nisa::nc_matmul_mx(ctx, &d, &a, &b, &ss, &ms, NcMatmulMxOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    assert_eq!(got, [2f32.powi(-18), 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn quantized_operands_multiply_to_within_the_mx_error_of_the_exact_product() {
    let (k, m, n) = (32usize, 8usize, 8usize);
    let a: Vec<f64> = uniform(k * m * 4, 61, -2.0, 2.0).iter().map(|&v| f64::from(bf16(v as f32))).collect();
    let b: Vec<f64> = uniform(k * n * 4, 62, -2.0, 2.0).iter().map(|&v| f64::from(bf16(v as f32))).collect();
    let got = trn3()
        .run(|ctx| {
            let (sa, sb) = (
                sbuf_with(ctx, &[k as i64, (m * 4) as i64], Dtype::Bf16, &a)?,
                sbuf_with(ctx, &[k as i64, (n * 4) as i64], Dtype::Bf16, &b)?,
            );
            let (qa, qb) = (
                alloc(ctx, &[k as i64, m as i64], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?,
                alloc(ctx, &[k as i64, n as i64], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?,
            );
            let (ea, eb) = (
                alloc(ctx, &[(k / 8) as i64, m as i64], Dtype::Fp8E8m0, Buffer::Sbuf)?,
                alloc(ctx, &[(k / 8) as i64, n as i64], Dtype::Fp8E8m0, Buffer::Sbuf)?,
            );
            nisa::quantize_mx(ctx, &qa, &sa, &ea, NameOpts::default())?;
            nisa::quantize_mx(ctx, &qb, &sb, &eb, NameOpts::default())?;
            let d = alloc(ctx, &[m as i64, n as i64], Dtype::F32, Buffer::Psum)?;
            nisa::nc_matmul_mx(ctx, &d, &qa, &qb, &ea, &eb, NcMatmulMxOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    // Element (r, c) of the product contracts a[kk, 4r + j] with b[kk, 4c + j].
    for r in 0..m {
        for c in 0..n {
            let terms = (0..k).flat_map(|kk| (0..4).map(move |j| (kk, j)));
            let exact: f64 = terms.clone().map(|(kk, j)| a[kk * m * 4 + 4 * r + j] * b[kk * n * 4 + 4 * c + j]).sum();
            let mag: f64 = terms.map(|(kk, j)| (a[kk * m * 4 + 4 * r + j] * b[kk * n * 4 + 4 * c + j]).abs()).sum();
            // Each e4m3 element is within 2^-4 relative (or its group's subnormal step) of its value.
            let g = f64::from(got[r * n + c]);
            assert!(
                (g - exact).abs() <= mag * (2.0 * 2f64.powi(-4) + 2f64.powi(-8)),
                "({r}, {c}): got {g}, exact {exact}, bound from {mag}"
            );
        }
    }
}

#[test]
fn run_time_errors_name_the_generation_and_the_rule() {
    let x = vec![1.0; 32 * 8];
    let e = expect_err(launch(Precision::Hardware).run(|ctx| {
        let s = sbuf_with(ctx, &[32, 8], Dtype::Bf16, &x)?;
        let d = alloc(ctx, &[32, 2], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?;
        let sc = alloc(ctx, &[4, 2], Dtype::Fp8E8m0, Buffer::Sbuf)?;
        nisa::quantize_mx(ctx, &d, &s, &sc, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.quantize_mx exists on trn3 only", "targets trn2"]);
    let e = expect_err(quantize(&x[..16 * 16], 16, 16, Dtype::Fp8E4m3Fnx4, Dtype::Fp8E8m0));
    assert_err(&e, ErrorKind::Shape, &["multiple of 32 partitions"]);
    let e = expect_err(quantize(&x, 32, 8, Dtype::Fp8E4m3Fn, Dtype::Fp8E8m0));
    assert_err(&e, ErrorKind::Dtype, &["dst", "float8_e5m2_x4 or float8_e4m3fn_x4"]);
    let e = expect_err(quantize(&x, 32, 8, Dtype::Fp8E5m2x4, Dtype::Bf16));
    assert_err(&e, ErrorKind::Dtype, &["dst_scale", "float8_e8m0fnu or uint8"]);
    // Scales over two quadrants: a (P / 8)-row tile is too short, and a tile
    // starts at offset 0, 4, 8 or 12 of its quadrant.
    let y = vec![1.0; 64 * 8];
    let scaled = |rows: i64, start: i64| {
        trn3().run(|ctx| {
            let s = sbuf_with(ctx, &[64, 8], Dtype::Bf16, &y)?;
            let d = alloc(ctx, &[64, 2], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?;
            let sc = alloc(ctx, &[64, 2], Dtype::U8, Buffer::Sbuf)?;
            nisa::memset(ctx, &sc, 7.0, Default::default())?;
            nisa::quantize_mx(ctx, &d, &s, &sc.slice(0, start, start + rows, 1)?, NameOpts::default())?;
            Ok(sc.to_i64_vec())
        })
    };
    assert_err(&expect_err(scaled(8, 0)), ErrorKind::Shape, &["dst_scale", "at least 36 partitions"]);
    assert_err(&expect_err(scaled(36, 2)), ErrorKind::Constraint, &["dst_scale", "offset 0, 4, 8 or 12"]);
    let packed = scaled(36, 12).unwrap();
    // 1.0 in e4m3fn groups: scale 2^(0 - 7), biased 120, at rows 12..16 and 44..48.
    for p in 0..64 {
        let want = if (12..16).contains(&p) || (44..48).contains(&p) { 120 } else { 7 };
        assert_eq!(packed[p * 2..p * 2 + 2], [want, want], "scale row {p}");
    }
    // memset clears a packed tile (the library zeroes padded rows so) and
    // refuses any other value: which values a fill would pack is not defined.
    let e = expect_err(trn3().run(|ctx| {
        let d = alloc(ctx, &[32, 2], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?;
        nisa::memset(ctx, &d, 1.0, Default::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["packs four MX values", "zeros only"]);
    for dtype in [Dtype::Fp8E4m3Fnx4, Dtype::Fp4E2m1Fnx4] {
        let words = trn3()
            .run(|ctx| {
                let d = alloc(ctx, &[32, 2], dtype, Buffer::Sbuf)?;
                nisa::memset(ctx, &d, 0.0, Default::default())?;
                Ok(d.to_i64_vec())
            })
            .unwrap();
        assert!(words.iter().all(|&w| w == 0), "{dtype}: {words:?}");
    }
    // Packed tiles are refused by the other compute instructions.
    let e = expect_err(trn3().run(|ctx| {
        let d = alloc(ctx, &[32, 2], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?;
        let s = alloc(ctx, &[32, 2], Dtype::Fp8E4m3Fnx4, Buffer::Sbuf)?;
        nisa::memset(ctx, &s, 0.0, Default::default())?;
        nisa::tensor_copy(ctx, &d, &s, Default::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["packs four MX values"]);
}

#[test]
fn a_group_holding_nan_gets_nan_elements_and_the_nan_scale() {
    let mut x = vec![1.0; 32 * 8];
    x[3 * 8 + 5] = f64::NAN; // group (0, 1)
    let (d, e) = quantize(&x, 32, 8, Dtype::Fp8E4m3Fnx4, Dtype::U8).unwrap();
    let (words, scales) = (d.to_i64_vec(), e.to_i64_vec());
    // Scale of 1.0 in e4m3fn: 2^(0 - 7), biased 120; 1.0 / 2^-7 = 2^7 is code 0x70.
    assert_eq!(scales[..2], [120, 255]);
    assert!(scales[2..].iter().all(|&s| s == 120));
    for p in 0..32 {
        assert_eq!(words[p * 2], 0x7070_7070);
        assert_eq!(words[p * 2 + 1], if p < 8 { 0x7f7f_7f7f } else { 0x7070_7070 }, "partition {p}");
    }
}
