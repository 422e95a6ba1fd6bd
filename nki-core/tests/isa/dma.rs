//! `nisa.dma_copy` (row-major pairing, dtype casts, memory rules) and
//! `nisa.dma_transpose` (the three permutations, shape and dtype rules, and the
//! DGE-mode rules of the NKI 2.32 docstring: one failing call per rule, and
//! calls at the edge of each hardware-DGE limit that must pass).

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, DgeMode, DmaCopyOpts, DmaTransposeOpts, OobMode, dge_mode};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor, s};

fn copy(ctx: &Ctx, dst: &Tensor, src: &Tensor) -> Result<()> {
    nisa::dma_copy(ctx, dst, src, DmaCopyOpts::default())
}

/// Copies `values` (as f32 in HBM) into a fresh SBUF tile of `dtype` and back out as f32.
fn cast_through(precision: Precision, dtype: Dtype, values: &[f32]) -> Vec<f32> {
    let n = values.len();
    let src = Tensor::from_f32(&[1, n], values, Dtype::F32).unwrap();
    launch(precision)
        .run(|ctx| {
            let t = alloc(ctx, &[1, n as i64], dtype, Buffer::Sbuf)?;
            copy(ctx, &t, &src)?;
            Ok(t.to_f32_vec())
        })
        .unwrap()
}

#[test]
fn round_trip_and_row_major_pairing_of_different_shapes() {
    let src = hbm(&[2, 6], &arange(12), Dtype::F32);
    let out = Tensor::zeros(&[3, 4], Dtype::F32).unwrap();
    Launch::new()
        .run(|ctx| {
            let t = alloc(ctx, &[4, 3], Dtype::F32, Buffer::Sbuf)?;
            copy(ctx, &t, &src)?;
            assert_eq!(t.index(&s![1])?.to_f32_vec(), vec![3., 4., 5.]);
            copy(ctx, &out, &t)?;
            Ok(())
        })
        .unwrap();
    assert_eq!(out.to_f32_vec(), (0..12).map(|v| v as f32).collect::<Vec<_>>());
}

#[test]
fn strided_views_on_both_sides() {
    let src = hbm(&[4, 6], &arange(24), Dtype::F32);
    let dst = Tensor::zeros(&[6, 8], Dtype::F32).unwrap();
    Launch::new()
        .run(|ctx| {
            // Read the transpose of rows 0..4, columns 0..6 and write it into every other column.
            let tr = src.ap(&[[1, 6], [6, 4]], Some(0), None, 0)?;
            copy(ctx, &dst.index(&s![.., 0..8;2])?, &tr)
        })
        .unwrap();
    let got = dst.to_f32_vec();
    for r in 0..6 {
        for c in 0..8 {
            let want = if c % 2 == 0 { (c / 2 * 6 + r) as f32 } else { 0.0 };
            assert_eq!(got[r * 8 + c], want, "({r}, {c})");
        }
    }
}

#[test]
fn overlapping_source_and_destination_read_before_write() {
    let t = hbm(&[2, 6], &arange(12), Dtype::F32);
    Launch::new().run(|ctx| copy(ctx, &t.index(&s![0, 1..6])?, &t.index(&s![0, 0..5])?)).unwrap();
    assert_eq!(t.index(&s![0]).unwrap().to_f32_vec(), vec![0., 0., 1., 2., 3., 4.]);
    assert_eq!(t.index(&s![1]).unwrap().to_f32_vec(), vec![6., 7., 8., 9., 10., 11.]);
}

#[test]
fn element_count_psum_and_hwdge_rules() {
    let src = hbm(&[2, 6], &arange(12), Dtype::F32);
    Launch::new()
        .run(|ctx| {
            let small = alloc(ctx, &[2, 5], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(copy(ctx, &small, &src));
            assert_err(&e, ErrorKind::Shape, &["nisa.dma_copy", "12 elements", "has 10"]);
            let ps = alloc(ctx, &[2, 6], Dtype::F32, Buffer::Psum)?;
            let e = expect_err(copy(ctx, &ps, &src));
            assert_err(&e, ErrorKind::Constraint, &["nisa.dma_copy", "dst", "PSUM"]);
            let e = expect_err(copy(ctx, &src, &ps));
            assert_err(&e, ErrorKind::Constraint, &["src", "tensor_copy"]);
            let bf = alloc(ctx, &[2, 6], Dtype::Bf16, Buffer::Sbuf)?;
            let hw = DmaCopyOpts { dge_mode: Some(dge_mode::hwdge), ..Default::default() };
            let e = expect_err(nisa::dma_copy(ctx, &bf, &src, hw));
            assert_err(&e, ErrorKind::Dtype, &["hwdge", "float32", "bfloat16"]);
            // Equal dtypes are fine under hwdge; SBUF to SBUF works too.
            let f = alloc(ctx, &[2, 6], Dtype::F32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &f, &src, hw)?;
            let g = alloc(ctx, &[3, 4], Dtype::F32, Buffer::Sbuf)?;
            copy(ctx, &g, &f)?;
            assert_eq!(g.to_f32_vec(), src.to_f32_vec());
            Ok(())
        })
        .unwrap();
}

#[test]
fn float_casts_round_to_nearest_even_like_half() {
    // Values exact in f32 that sit on, above and below bf16/f16 rounding ties.
    let mut vals: Vec<f32> = vec![
        1.0 + 2f32.powi(-8),                  // bf16 tie, rounds down to even
        1.0 + 3.0 * 2f32.powi(-8),            // bf16 tie, rounds up to even
        1.0 + 2f32.powi(-8) + 2f32.powi(-20), // just above a tie
        -(1.0 + 2f32.powi(-11)),              // f16 tie
        -(1.0 + 3.0 * 2f32.powi(-11)),        // f16 tie, rounds up
        65504.0,
        65520.0, // f16 overflows to inf
        3.0e38,
        1.0e-40, // subnormal in f32
        0.0,
        -0.0,
    ];
    vals.extend(uniform(200, 7, -1000.0, 1000.0).iter().map(|&v| v as f32));
    let got = cast_through(Precision::Hardware, Dtype::Bf16, &vals);
    assert_bits(&got, &vals.iter().map(|&v| bf16(v)).collect::<Vec<_>>());
    let got = cast_through(Precision::Hardware, Dtype::F16, &vals);
    assert_bits(&got, &vals.iter().map(|&v| f16(v)).collect::<Vec<_>>());
    // In fp32 precision the declared dtype does not round.
    let got = cast_through(Precision::Fp32, Dtype::Bf16, &vals);
    assert_bits(&got, &vals);
}

/// float8_e5m2 is the top byte of float16: round the f16 bit pattern to nearest even.
fn e5m2_of_f16_value(x: f32) -> f32 {
    let b = half::f16::from_f32(x).to_bits();
    let lsb = (b >> 8) & 1;
    let r = (b as u32 + 0x7f + lsb as u32) as u16 & 0xff00;
    half::f16::from_bits(r).to_f32()
}

#[test]
fn float8_e5m2_cast() {
    // Values exact in f16 so the reference is a single rounding of its bit pattern.
    let vals: Vec<f32> = uniform(300, 11, -60000.0, 60000.0)
        .iter()
        .chain(&uniform(300, 12, -0.01, 0.01))
        .map(|&v| f16(v as f32))
        .chain([1.125, 1.375, 0.0, 57344.0, 61440.0])
        .collect();
    let got = cast_through(Precision::Hardware, Dtype::Fp8E5m2, &vals);
    let want: Vec<f32> = vals.iter().map(|&v| e5m2_of_f16_value(v)).collect();
    assert_bits(&got, &want);
    assert_eq!(want[want.len() - 1], f32::INFINITY);
}

#[test]
fn float_to_integer_rounds_half_to_even_and_saturates() {
    let vals = [2.5f32, 3.5, -2.5, -0.5, 1.0e10, -1.0e10, 300.7, 127.5];
    let src = Tensor::from_f32(&[1, 8], &vals, Dtype::F32).unwrap();
    let got = Launch::new()
        .run(|ctx| {
            let mut out = Vec::new();
            for d in [Dtype::I32, Dtype::U8, Dtype::I8, Dtype::U16] {
                let t = alloc(ctx, &[1, 8], d, Buffer::Sbuf)?;
                copy(ctx, &t, &src)?;
                out.push(t.to_i64_vec());
            }
            Ok(out)
        })
        .unwrap();
    assert_eq!(got[0], vec![2, 4, -2, 0, i32::MAX as i64, i32::MIN as i64, 301, 128]);
    assert_eq!(got[1], vec![2, 4, 0, 0, 255, 0, 255, 128]);
    assert_eq!(got[2], vec![2, 4, -2, 0, 127, -128, 127, 127]);
    assert_eq!(got[3], vec![2, 4, 0, 0, 65535, 0, 301, 128]);
}

#[test]
fn integer_sources_cast_through_fp32() {
    let src = Tensor::from_i64(&[1, 5], &[16_777_217, -5, 300, 70_000, -40_000], Dtype::I32).unwrap();
    let (f, b, u, i16v, same) = Launch::new()
        .run(|ctx| {
            let f = alloc(ctx, &[1, 5], Dtype::F32, Buffer::Sbuf)?;
            let b = alloc(ctx, &[1, 5], Dtype::Bf16, Buffer::Sbuf)?;
            let u = alloc(ctx, &[1, 5], Dtype::U8, Buffer::Sbuf)?;
            let i = alloc(ctx, &[1, 5], Dtype::I16, Buffer::Sbuf)?;
            let same = alloc(ctx, &[1, 5], Dtype::I32, Buffer::Sbuf)?;
            for t in [&f, &b, &u, &i, &same] {
                copy(ctx, t, &src)?;
            }
            Ok((f.to_f32_vec(), b.to_f32_vec(), u.to_i64_vec(), i.to_i64_vec(), same.to_i64_vec()))
        })
        .unwrap();
    // 2^24 + 1 is not representable in f32 (ties to even 2^24).
    assert_eq!(f, vec![16_777_216.0, -5.0, 300.0, 70_000.0, -40_000.0]);
    let want_b: Vec<f32> = [16_777_217i64, -5, 300, 70_000, -40_000].iter().map(|&v| bf16(v as f32)).collect();
    assert_bits(&b, &want_b);
    assert_eq!(u, vec![255, 0, 255, 255, 0]);
    assert_eq!(i16v, vec![32767, -5, 300, 32767, -32768]);
    // Equal dtypes copy exactly, even beyond 2^24.
    assert_eq!(same, vec![16_777_217, -5, 300, 70_000, -40_000]);
}

fn transpose_into(ctx: &Ctx, dst: &Tensor, src: &Tensor, axes: Option<Vec<i64>>) -> Result<()> {
    nisa::dma_transpose(ctx, dst, src, DmaTransposeOpts { axes, ..Default::default() })
}

#[test]
fn dma_transpose_two_three_and_four_dims() {
    let src2 = hbm(&[3, 5], &arange(15), Dtype::Bf16);
    let src3 = hbm(&[2, 3, 4], &arange(24), Dtype::F32);
    let src4 = hbm(&[2, 3, 4, 5], &arange(120), Dtype::F32);
    Launch::new()
        .run(|ctx| {
            let d2 = alloc(ctx, &[5, 3], Dtype::Bf16, Buffer::Sbuf)?;
            transpose_into(ctx, &d2, &src2, None)?;
            let g = d2.to_f32_vec();
            for b in 0..5 {
                for a in 0..3 {
                    assert_eq!(g[b * 3 + a], (a * 5 + b) as f32);
                }
            }
            let d3 = alloc(ctx, &[4, 3, 2], Dtype::F32, Buffer::Sbuf)?;
            transpose_into(ctx, &d3, &src3, Some(vec![2, 1, 0]))?;
            let g = d3.to_f32_vec();
            for c in 0..4 {
                for b in 0..3 {
                    for a in 0..2 {
                        assert_eq!(g[(c * 3 + b) * 2 + a], ((a * 3 + b) * 4 + c) as f32);
                    }
                }
            }
            // (3, 1, 2, 0): swap the outer and inner dims, keep the middle two.
            let d4 = alloc(ctx, &[5, 3, 4, 2], Dtype::F32, Buffer::Sbuf)?;
            transpose_into(ctx, &d4, &src4, None)?;
            let g = d4.to_f32_vec();
            for d in 0..5 {
                for b in 0..3 {
                    for c in 0..4 {
                        for a in 0..2 {
                            let want = (((a * 3 + b) * 4 + c) * 5 + d) as f32;
                            assert_eq!(g[((d * 3 + b) * 4 + c) * 2 + a], want);
                        }
                    }
                }
            }
            // SBUF to SBUF, reading a sub-view.
            let back = alloc(ctx, &[2, 5], Dtype::Bf16, Buffer::Sbuf)?;
            transpose_into(ctx, &back, &d2.index(&s![.., 1..3])?, None)?;
            assert_eq!(back.to_f32_vec(), vec![5., 6., 7., 8., 9., 10., 11., 12., 13., 14.]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn dma_transpose_rules() {
    let src = hbm(&[3, 5], &arange(15), Dtype::F32);
    Launch::new()
        .run(|ctx| {
            let hbm_dst = alloc(ctx, &[5, 3], Dtype::F32, Buffer::PrivateHbm)?;
            let e = expect_err(transpose_into(ctx, &hbm_dst, &src, None));
            assert_err(&e, ErrorKind::Constraint, &["nisa.dma_transpose", "must be in SBUF"]);
            let bf = alloc(ctx, &[5, 3], Dtype::Bf16, Buffer::Sbuf)?;
            let e = expect_err(transpose_into(ctx, &bf, &src, None));
            assert_err(&e, ErrorKind::Dtype, &["does not cast"]);
            let wrong = alloc(ctx, &[3, 5], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(transpose_into(ctx, &wrong, &src, None));
            assert_err(&e, ErrorKind::Shape, &["[5, 3]"]);
            let ok = alloc(ctx, &[5, 3], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(transpose_into(ctx, &ok, &src, Some(vec![0, 1])));
            assert_err(&e, ErrorKind::Shape, &["[0, 1]"]);
            let e = expect_err(transpose_into(ctx, &ok, &src, Some(vec![2, 1, 0])));
            assert_eq!(e.kind, ErrorKind::Shape);
            let flat = hbm(&[15], &arange(15), Dtype::F32);
            let e = expect_err(transpose_into(ctx, &ok, &flat, None));
            assert_err(&e, ErrorKind::Shape, &["2-, 3- or 4-d"]);
            let ps = alloc(ctx, &[3, 5], Dtype::F32, Buffer::Psum)?;
            let e = expect_err(transpose_into(ctx, &ok, &ps, None));
            assert_err(&e, ErrorKind::Constraint, &["PSUM"]);
            Ok(())
        })
        .unwrap();
}

/// `dma_transpose` of an HBM `src` of `shape` (values 0, 1, ...) into a fresh SBUF
/// tile of `dst_shape`, with `opts`, on `generation`; returns dst's values.
fn transpose_with(
    generation: Generation,
    shape: &[usize],
    dtype: Dtype,
    dst_shape: &[i64],
    opts: DmaTransposeOpts<'static>,
) -> Result<Vec<f32>> {
    let n = shape.iter().product();
    let src = hbm(shape, &arange(n), dtype);
    Launch::new().generation(generation).run(move |ctx| {
        let dst = alloc(ctx, dst_shape, dtype, Buffer::Sbuf)?;
        nisa::dma_transpose(ctx, &dst, &src, opts.clone())?;
        Ok(dst.to_f32_vec())
    })
}

fn hwdge() -> DmaTransposeOpts<'static> {
    DmaTransposeOpts { dge_mode: Some(DgeMode::Hwdge), ..Default::default() }
}

/// A transpose that must fail with `kind`, its message starting with the op and
/// containing `parts` (the operand, the offending values, the rule).
fn fails(result: Result<Vec<f32>>, kind: ErrorKind, parts: &[&str]) {
    let e = expect_err(result);
    assert_err(&e, kind, parts);
    assert!(e.to_string().starts_with("nisa.dma_transpose"), "{e}");
}

#[test]
fn dma_transpose_dge_rules_each_fail_with_the_op_operand_and_rule() {
    let (trn2, bf16) = (Generation::Trn2, Dtype::Bf16);
    let with = |dge_mode: Option<DgeMode>, oob_mode: Option<OobMode>| DmaTransposeOpts { dge_mode, oob_mode, ..Default::default() };
    // The dst rank must match src's: the 4-d form needs a 4-d dst.
    fails(
        transpose_with(trn2, &[4, 1, 1, 8], bf16, &[8, 4], with(None, None)),
        ErrorKind::Shape,
        &["dst:", "[8, 4]", "[8, 1, 1, 4]", "rank included"],
    );
    // Software DGE on a direct source; no DGE (a static transpose) is fine.
    fails(
        transpose_with(trn2, &[16, 8], bf16, &[8, 16], with(Some(DgeMode::Swdge), None)),
        ErrorKind::Constraint,
        &["dge_mode:", "dge_mode is swdge", "unknown, hwdge or none"],
    );
    assert!(transpose_with(trn2, &[16, 8], bf16, &[8, 16], with(Some(DgeMode::None), None)).is_ok());
    fails(
        transpose_with(trn2, &[16, 8], bf16, &[8, 16], with(None, Some(OobMode::Skip))),
        ErrorKind::Constraint,
        &["oob_mode:", "skip", "indirect"],
    );
    // The hardware DGE: its generation, dtype and leading-dim limits.
    fails(
        transpose_with(Generation::Trn1, &[16, 8], bf16, &[8, 16], hwdge()),
        ErrorKind::Constraint,
        &["dge_mode:", "trn1", "NeuronCore-v3"],
    );
    fails(transpose_with(trn2, &[16, 8], Dtype::F32, &[8, 16], hwdge()), ErrorKind::Dtype, &["src:", "float32 (4 bytes", "2-byte"]);
    fails(transpose_with(trn2, &[8, 64], bf16, &[64, 8], hwdge()), ErrorKind::Shape, &["src:", "src.shape[0] = 8", "== 16 for a 2-d src"]);
    fails(
        transpose_with(trn2, &[3, 16, 8], bf16, &[8, 16, 3], hwdge()),
        ErrorKind::Shape,
        &["src:", "src.shape[0] = 3", "{1, 2, 4, 8, 16}"],
    );
    fails(transpose_with(trn2, &[2, 1, 4, 8], bf16, &[8, 1, 4, 2], hwdge()), ErrorKind::Shape, &["src:", "2 * 4 = 8", "multiple of 16"]);
}

/// The largest shapes each hardware-DGE limit allows transpose correctly, on
/// trn2 and trn3, and the default mode takes what hwdge would reject (the
/// library's `(rows, 1, 1, d)` form with rows = 512 and an fp32 dtype).
#[test]
fn dma_transpose_at_the_hwdge_limits_and_in_the_default_mode() {
    fn check_2d(rows: usize, cols: usize, got: &[f32]) {
        for c in 0..cols {
            for r in 0..rows {
                assert_eq!(got[c * rows + r], (r * cols + c) as f32, "({r}, {c})");
            }
        }
    }
    for generation in [Generation::Trn2, Generation::Trn3] {
        // f16 holds the values 0..2048 exactly.
        check_2d(16, 128, &transpose_with(generation, &[16, 128], Dtype::F16, &[128, 16], hwdge()).unwrap());
        // 4-d (a, 1, c, d) -> (d, 1, c, a) with a = 1 and a = 16, a * c a multiple of 16.
        for (a, c) in [(1usize, 16usize), (16, 1), (8, 2)] {
            let got = transpose_with(generation, &[a, 1, c, 128], Dtype::F16, &[128, 1, c as i64, a as i64], hwdge()).unwrap();
            for d in 0..128 {
                for k in 0..c {
                    for i in 0..a {
                        assert_eq!(got[(d * c + k) * a + i], ((i * c + k) * 128 + d) as f32, "({i}, {k}, {d})");
                    }
                }
            }
        }
    }
    let got = transpose_with(Generation::Trn2, &[512, 1, 1, 96], Dtype::F32, &[96, 1, 1, 512], DmaTransposeOpts::default()).unwrap();
    check_2d(512, 96, &got);
    let unknown = DmaTransposeOpts { dge_mode: Some(DgeMode::Unknown), ..Default::default() };
    check_2d(3, 100, &transpose_with(Generation::Trn1, &[3, 100], Dtype::F32, &[100, 3], unknown).unwrap());
}
