//! Tensor Engine: `nc_matmul` (numerics, PSUM accumulation rules, transpose mode,
//! strided operands, limits) and `nc_transpose` (PE and Vector engines).

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, EngineOpts, NcMatmulOpts, NcTransposeOpts, engine};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor, s};

/// `dst[m, n] = Σ_k st[k, m] · mv[k, n]` in f64 (row-major `K×M`, `K×N`).
fn reference(st: &[f64], mv: &[f64], k: usize, m: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| st[p * m + i] * mv[p * n + j]).sum();
        }
    }
    out
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

fn mm(ctx: &Ctx, dst: &Tensor, st: &Tensor, mv: &Tensor) -> Result<()> {
    nisa::nc_matmul(ctx, dst, st, mv, NcMatmulOpts::default())
}

fn mm_acc(ctx: &Ctx, dst: &Tensor, st: &Tensor, mv: &Tensor, accumulate: bool) -> Result<()> {
    nisa::nc_matmul(ctx, dst, st, mv, NcMatmulOpts { accumulate: Some(accumulate), ..Default::default() })
}

fn psum(ctx: &Ctx, shape: &[i64], dtype: Dtype) -> Result<Tensor> {
    alloc(ctx, shape, dtype, Buffer::Psum)
}

#[test]
fn fp32_matmul_matches_f64() {
    let (k, m, n) = (64, 32, 48);
    let a = uniform(k * m, 1, -1.0, 1.0);
    let b = uniform(k * n, 2, -1.0, 1.0);
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::F32, &a)?;
            let mv = sbuf_with(ctx, &[k as i64, n as i64], Dtype::F32, &b)?;
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            mm(ctx, &ps, &st, &mv)?;
            Ok(ps.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f64> = reference(&f32_cells(&a), &f32_cells(&b), k, m, n);
    assert_close(&got, &want, 1e-5, 1e-5);
}

/// The fp32 sum is defined (SEMANTICS.md, accumulation order): products added
/// in partition order from zero, one fused rounding per step. `-(1 + 2^-11)`
/// then `(1 + 2^-12)²` = `1 + 2^-11 + 2^-24` sums to `2^-24` fused, where
/// rounding the product first (an unfused step) gives 0; the same products in
/// the other order give 0 too, the first product rounding alone. So the
/// expected values tell this order from an unfused, a reversed or a pairwise one.
#[test]
fn fp32_products_add_in_partition_order_with_one_rounding_per_step() {
    let x = 1.0 + 2f64.powi(-12);
    let y = -(1.0 + 2f64.powi(-11));
    // st [K=2, M=1], mv [K=2, N=1]: dst = st[0]·mv[0] + st[1]·mv[1].
    let dot = |st: [f64; 2], mv: [f64; 2]| {
        launch(Precision::Fp32)
            .run(|ctx| {
                let st = sbuf_with(ctx, &[2, 1], Dtype::F32, &st)?;
                let mv = sbuf_with(ctx, &[2, 1], Dtype::F32, &mv)?;
                let ps = psum(ctx, &[1, 1], Dtype::F32)?;
                mm(ctx, &ps, &st, &mv)?;
                Ok(ps.to_f32_vec()[0])
            })
            .unwrap()
    };
    assert_eq!(dot([y, x], [1.0, x]), 2f32.powi(-24), "fused, in partition order");
    assert_eq!(dot([x, y], [x, 1.0]), 0.0, "the first product rounds alone when it comes first");
}

#[test]
fn accumulate_none_overwrites_first_then_accumulates_and_new_ndarrays_start_fresh() {
    let (k, m, n) = (16, 8, 12);
    let a: Vec<Vec<f64>> = (0..3).map(|i| dyadic(k * m, 10 + i, -2.0, 2.0, 4)).collect();
    let b: Vec<Vec<f64>> = (0..3).map(|i| dyadic(k * n, 20 + i, -2.0, 2.0, 4)).collect();
    let r: Vec<Vec<f64>> = (0..3).map(|i| reference(&a[i], &b[i], k, m, n)).collect();
    Launch::new()
        .run(|ctx| {
            let st: Vec<Tensor> = a.iter().map(|v| sbuf_with(ctx, &[k as i64, m as i64], Dtype::F32, v)).collect::<Result<_>>()?;
            let mv: Vec<Tensor> = b.iter().map(|v| sbuf_with(ctx, &[k as i64, n as i64], Dtype::F32, v)).collect::<Result<_>>()?;
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            mm(ctx, &ps, &st[0], &mv[0])?;
            assert_close(&ps.to_f32_vec(), &r[0], 0.0, 0.0);
            mm(ctx, &ps, &st[1], &mv[1])?;
            assert_close(&ps.to_f32_vec(), &add(&r[0], &r[1]), 0.0, 0.0);
            // A new allocation, even right after the old one is dropped, overwrites.
            drop(ps);
            let fresh = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            mm(ctx, &fresh, &st[2], &mv[2])?;
            assert_close(&fresh.to_f32_vec(), &r[2], 0.0, 0.0);
            // accumulate=False always overwrites, accumulate=True always adds.
            mm_acc(ctx, &fresh, &st[0], &mv[0], false)?;
            assert_close(&fresh.to_f32_vec(), &r[0], 0.0, 0.0);
            mm_acc(ctx, &fresh, &st[1], &mv[1], true)?;
            assert_close(&fresh.to_f32_vec(), &add(&r[0], &r[1]), 0.0, 0.0);
            // Views share the written state of their allocation.
            let fresh2 = psum(ctx, &[m as i64, 2 * n as i64], Dtype::F32)?;
            mm(ctx, &fresh2.index(&s![.., 0..n])?, &st[0], &mv[0])?;
            mm(ctx, &fresh2.index(&s![.., 0..n])?, &st[1], &mv[1])?;
            mm(ctx, &fresh2.index(&s![.., n..2 * n])?, &st[2], &mv[2])?;
            assert_close(&fresh2.index(&s![.., 0..n])?.to_f32_vec(), &add(&r[0], &r[1]), 0.0, 0.0);
            assert_close(&fresh2.index(&s![.., n..2 * n])?.to_f32_vec(), &r[2], 0.0, 0.0);
            Ok(())
        })
        .unwrap();
}

#[test]
fn accumulate_none_is_decided_per_element() {
    let (k, m, n) = (8, 4, 6);
    let a = dyadic(k * m, 31, -2.0, 2.0, 3);
    let b = dyadic(k * 2 * n, 32, -2.0, 2.0, 3);
    let c = dyadic(k * n, 33, -2.0, 2.0, 3);
    let r_wide = reference(&a, &b, k, m, 2 * n);
    let r_half = reference(&a, &c, k, m, n);
    Launch::new()
        .run(|ctx| {
            let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::F32, &a)?;
            let wide = sbuf_with(ctx, &[k as i64, 2 * n as i64], Dtype::F32, &b)?;
            let narrow = sbuf_with(ctx, &[k as i64, n as i64], Dtype::F32, &c)?;
            let ps = psum(ctx, &[m as i64, 2 * n as i64], Dtype::F32)?;
            // Write the first half, then a full-width matmul: the first half
            // accumulates and the second half (never written) is overwritten.
            mm(ctx, &ps.index(&s![.., 0..n])?, &st, &narrow)?;
            mm(ctx, &ps, &st, &wide)?;
            let got = ps.to_f32_vec();
            for i in 0..m {
                for j in 0..2 * n {
                    let want = r_wide[i * 2 * n + j] + if j < n { r_half[i * n + j] } else { 0.0 };
                    assert_eq!(f64::from(got[i * 2 * n + j]), want, "({i}, {j})");
                }
            }
            Ok(())
        })
        .unwrap();
}

/// On trn3, where adding onto non-matmul PSUM values is defined (on trn1/trn2 it is
/// an error, `nki-core/tests/emulator/psum_accumulation.rs`).
#[test]
fn non_matmul_writes_count_as_written_for_accumulate_none() {
    let (k, m, n) = (4, 3, 5);
    let a = dyadic(k * m, 41, -2.0, 2.0, 3);
    let b = dyadic(k * n, 42, -2.0, 2.0, 3);
    let bias = dyadic(m * n, 43, -4.0, 4.0, 3);
    let r = reference(&a, &b, k, m, n);
    Launch::new()
        .generation(Generation::Trn3)
        .run(|ctx| {
            let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::F32, &a)?;
            let mv = sbuf_with(ctx, &[k as i64, n as i64], Dtype::F32, &b)?;
            // memset then a default matmul: accumulates onto the memset value.
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            nisa::memset(ctx, &ps, 0.5, EngineOpts::default())?;
            mm(ctx, &ps, &st, &mv)?;
            assert_close(&ps.to_f32_vec(), &r.iter().map(|v| v + 0.5).collect::<Vec<_>>(), 0.0, 0.0);
            // The position-bias idiom: copy a bias into PSUM, then accumulate=True.
            let b_sb = sbuf_with(ctx, &[m as i64, n as i64], Dtype::F32, &bias)?;
            let ps2 = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            nisa::tensor_copy(ctx, &ps2, &b_sb, EngineOpts::default())?;
            mm_acc(ctx, &ps2, &st, &mv, true)?;
            assert_close(&ps2.to_f32_vec(), &add(&r, &bias), 0.0, 0.0);
            Ok(())
        })
        .unwrap();
}

#[test]
fn bf16_operands_accumulate_in_fp32_psum() {
    // Exactly: 1 + 2^-10 fits fp32 but not bf16.
    let tiny = 2f64.powi(-10);
    let got = Launch::new()
        .run(|ctx| {
            let st = sbuf_with(ctx, &[2, 1], Dtype::Bf16, &[1.0, 1.0])?;
            let mv = sbuf_with(ctx, &[2, 1], Dtype::Bf16, &[1.0, tiny])?;
            let ps = psum(ctx, &[1, 1], Dtype::F32)?;
            mm(ctx, &ps, &st, &mv)?;
            let once = ps.to_f32_vec()[0];
            mm(ctx, &ps, &st, &mv)?;
            let twice = ps.to_f32_vec()[0];
            let out = alloc(ctx, &[1, 1], Dtype::Bf16, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &out, &ps, EngineOpts::default())?;
            Ok((once, twice, out.to_f32_vec()[0]))
        })
        .unwrap();
    assert_eq!(f64::from(got.0), 1.0 + tiny);
    assert_eq!(f64::from(got.1), 2.0 + 2.0 * tiny);
    assert_eq!(got.2, bf16((2.0 + 2.0 * tiny) as f32));
    assert_eq!(got.2, 2.0);

    // A random bf16 product: inputs rounded to bf16, exact products, fp32 sums.
    let (k, m, n) = (128, 64, 96);
    let a = uniform(k * m, 5, -1.0, 1.0);
    let b = uniform(k * n, 6, -1.0, 1.0);
    let got = Launch::new()
        .run(|ctx| {
            let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::Bf16, &a)?;
            let mv = sbuf_with(ctx, &[k as i64, n as i64], Dtype::Bf16, &b)?;
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            mm(ctx, &ps, &st, &mv)?;
            Ok(ps.to_f32_vec())
        })
        .unwrap();
    let rb = |v: &[f64]| v.iter().map(|&x| f64::from(bf16(x as f32))).collect::<Vec<_>>();
    assert_close(&got, &reference(&rb(&a), &rb(&b), k, m, n), 1e-6, 1e-5);
}

#[test]
fn bf16_psum_on_trn3_rounds_every_write() {
    let (k, m, n) = (8, 4, 16);
    let a: Vec<Vec<f64>> = (0..2).map(|i| dyadic(k * m, 50 + i, -4.0, 4.0, 3)).collect();
    let b: Vec<Vec<f64>> = (0..2).map(|i| dyadic(k * n, 60 + i, -4.0, 4.0, 3)).collect();
    let got = Launch::new()
        .generation(Generation::Trn3)
        .run(|ctx| {
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::Bf16)?;
            let mut seen = Vec::new();
            for i in 0..2 {
                let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::Bf16, &a[i])?;
                let mv = sbuf_with(ctx, &[k as i64, n as i64], Dtype::Bf16, &b[i])?;
                mm(ctx, &ps, &st, &mv)?;
                seen.push(ps.to_f32_vec());
            }
            Ok(seen)
        })
        .unwrap();
    // Inputs have 6 significant bits, so each sum is exact in f32 and only the
    // bf16 write rounds: upcast, add in fp32, round back.
    let r0 = reference(&a[0], &b[0], k, m, n);
    let r1 = reference(&a[1], &b[1], k, m, n);
    let first: Vec<f32> = r0.iter().map(|&v| bf16(v as f32)).collect();
    let second: Vec<f32> = first.iter().zip(&r1).map(|(&p, &v)| bf16((f64::from(p) + v) as f32)).collect();
    assert_bits(&got[0], &first);
    assert_bits(&got[1], &second);
    assert!(first.iter().zip(&r0).any(|(&f, &v)| f64::from(f) != v), "the test data must exercise rounding");

    // trn2 PSUM matmul output must be fp32.
    let e = expect_err(Launch::new().run(|ctx| {
        let st = sbuf_with(ctx, &[2, 2], Dtype::Bf16, &[1.0; 4])?;
        mm(ctx, &psum(ctx, &[2, 2], Dtype::Bf16)?, &st, &st)
    }));
    assert_err(&e, ErrorKind::Dtype, &["nisa.nc_matmul", "must be float32 on trn2"]);
}

#[test]
fn transpose_mode_is_bit_exact_and_keeps_the_input_dtype() {
    let vals: Vec<f64> = vec![1.5, -0.0, f64::INFINITY, f64::NAN, 3.0e38, 1e-3, -7.25, 0.1, 2.0, 65504.0, -1.0, 1.0 / 3.0];
    let got = Launch::new()
        .run(|ctx| {
            let mut out = Vec::new();
            for d in [Dtype::Bf16, Dtype::F32] {
                let st = sbuf_with(ctx, &[4, 3], d, &vals)?;
                let eye: Vec<f64> = (0..16).map(|i| if i % 5 == 0 { 1.0 } else { 0.0 }).collect();
                let mv = sbuf_with(ctx, &[4, 4], d, &eye)?;
                let ps = psum(ctx, &[3, 4], d)?;
                nisa::nc_matmul(ctx, &ps, &st, &mv, NcMatmulOpts { is_transpose: Some(true), ..Default::default() })?;
                out.push((st.to_f32_vec(), ps.to_f32_vec()));
                // dst must keep the input dtype.
                let wrong = psum(ctx, &[3, 4], if d == Dtype::F32 { Dtype::Bf16 } else { Dtype::F32 })?;
                let e = expect_err(nisa::nc_matmul(ctx, &wrong, &st, &mv, NcMatmulOpts { is_transpose: Some(true), ..Default::default() }));
                assert_err(&e, ErrorKind::Dtype, &["is_transpose", d.nl_name()]);
            }
            Ok(out)
        })
        .unwrap();
    for (src, dst) in got {
        let want: Vec<f32> = (0..3).flat_map(|j| (0..4).map(move |p| (p, j))).map(|(p, j)| src[p * 3 + j]).collect();
        assert_bits(&dst, &want);
    }
}

#[test]
fn strided_and_offset_operand_views() {
    let (k, m, n) = (16, 6, 8);
    let big_a = dyadic(32 * 16, 71, -2.0, 2.0, 4);
    let big_b = dyadic(k * 2 * 12, 72, -2.0, 2.0, 4);
    Launch::new()
        .run(|ctx| {
            let sa = sbuf_with(ctx, &[32, 16], Dtype::F32, &big_a)?;
            let sb = sbuf_with(ctx, &[k as i64, 2, 12], Dtype::F32, &big_b)?;
            // stationary: partitions 8..24, every other column from 3 (free stride 2).
            let st = sa.index(&s![8..24, 3..15;2])?;
            // moving: partitions 0..16, a (2, 4) block of each row (two free dims
            // that do not merge).
            let mv = sb.index(&s![.., .., 5..9])?;
            let (ra, rb) = (&big_a, &big_b);
            let a: Vec<f64> = (0..k).flat_map(|p| (0..m).map(move |j| ra[(8 + p) * 16 + 3 + 2 * j])).collect();
            let b: Vec<f64> = (0..k).flat_map(|p| (0..2).flat_map(move |h| (0..4).map(move |w| rb[p * 24 + h * 12 + 5 + w]))).collect();
            let want = reference(&a, &b, k, m, n);
            // dst as an offset row block, a strided block and a 3-d view.
            let p1 = psum(ctx, &[8, 20], Dtype::F32)?;
            let d1 = p1.index(&s![2..8, 4..12])?;
            mm(ctx, &d1, &st, &mv)?;
            assert_close(&d1.to_f32_vec(), &want, 0.0, 0.0);
            let d2 = p1.index(&s![0..6, 0..16;2])?;
            mm_acc(ctx, &d2, &st, &mv, false)?;
            assert_close(&d2.to_f32_vec(), &want, 0.0, 0.0);
            let p3 = psum(ctx, &[m as i64, 2, 7], Dtype::F32)?;
            let d3 = p3.index(&s![.., .., 1..5])?;
            mm(ctx, &d3, &st, &mv)?;
            mm(ctx, &d3, &st, &mv)?;
            assert_close(&d3.to_f32_vec(), &want.iter().map(|v| 2.0 * v).collect::<Vec<_>>(), 0.0, 0.0);
            // Broadcast operands: a stride-0 moving view repeats one column.
            let col = sb.index(&s![.., 0, 0..1])?.broadcast(1, 5)?;
            let p4 = psum(ctx, &[m as i64, 5], Dtype::F32)?;
            mm(ctx, &p4, &st, &col)?;
            let bcol: Vec<f64> = (0..k).flat_map(|p| [big_b[p * 24]; 5]).collect();
            assert_close(&p4.to_f32_vec(), &reference(&a, &bcol, k, m, 5), 0.0, 0.0);
            Ok(())
        })
        .unwrap();
}

#[test]
fn matmul_limits_name_the_op_and_the_value() {
    Launch::new()
        .run(|ctx| {
            let f = |shape: &[i64], d: Dtype| sbuf_with(ctx, shape, d, &vec![1.0; shape.iter().product::<i64>() as usize]);
            let st16 = f(&[16, 8], Dtype::F32)?;
            let mv8 = f(&[8, 8], Dtype::F32)?;
            let ps = psum(ctx, &[8, 8], Dtype::F32)?;
            let e = expect_err(mm(ctx, &ps, &st16, &mv8));
            assert_err(&e, ErrorKind::Shape, &["nisa.nc_matmul", "16 partitions", "has 8"]);

            let wide_st = f(&[8, 129], Dtype::F32)?;
            let e = expect_err(mm(ctx, &ps, &wide_st, &mv8));
            assert_err(&e, ErrorKind::Constraint, &["nisa.nc_matmul", "free size 129", "gemm_stationary_fmax 128"]);

            let st = f(&[8, 8], Dtype::Bf16)?;
            let wide_mv = f(&[8, 1024], Dtype::Bf16)?;
            let ps_wide = psum(ctx, &[8, 1024], Dtype::Bf16)?;
            let e = expect_err(mm(ctx, &ps_wide, &st, &wide_mv));
            assert_err(&e, ErrorKind::Constraint, &["nisa.nc_matmul", "free size 1024", "gemm_moving_fmax 512", "trn2"]);
            // 512 is fine.
            mm(ctx, &psum(ctx, &[8, 512], Dtype::F32)?, &st, &wide_mv.index(&s![.., 0..512])?)?;

            let sb_dst = f(&[8, 8], Dtype::F32)?;
            let e = expect_err(mm(ctx, &sb_dst, &mv8, &mv8));
            assert_err(&e, ErrorKind::Constraint, &["nisa.nc_matmul", "dst", "must be in PSUM"]);
            let e = expect_err(mm(ctx, &ps, &ps, &mv8));
            assert_err(&e, ErrorKind::Constraint, &["stationary", "must be in SBUF"]);
            let h = hbm(&[8, 8], &[1.0; 64], Dtype::F32);
            let e = expect_err(mm(ctx, &ps, &mv8, &h));
            assert_err(&e, ErrorKind::Constraint, &["moving", "must be in SBUF"]);

            let e = expect_err(mm(ctx, &ps, &mv8, &st));
            assert_err(&e, ErrorKind::Dtype, &["float32", "bfloat16", "both must be"]);
            let ints = f(&[8, 8], Dtype::I32)?;
            let e = expect_err(mm(ctx, &ps, &ints, &ints));
            assert_err(&e, ErrorKind::Dtype, &["must be a float dtype"]);
            let e = expect_err(mm(ctx, &psum(ctx, &[8, 4], Dtype::F32)?, &mv8, &mv8));
            assert_err(&e, ErrorKind::Shape, &["8 x 8"]);
            let e = expect_err(mm(ctx, &psum(ctx, &[8, 8], Dtype::F16)?, &mv8, &mv8));
            assert_err(&e, ErrorKind::Dtype, &["must be float32"]);
            // Mixed 16-bit formats are allowed.
            mm(ctx, &ps, &st, &f(&[8, 8], Dtype::F16)?)?;
            assert!(ps.to_f32_vec().iter().all(|&v| v == 8.0));
            Ok(())
        })
        .unwrap();
}

/// A PSUM tensor may span banks (the library's rotational_topk holds [128, 1024]
/// fp32): each matmul writes one bank's 512 columns, the tensor takes whole banks,
/// so four of them fill PSUM and a fifth tensor live with them does not fit.
#[test]
fn a_psum_tensor_spans_banks_written_one_bank_per_matmul() {
    let (k, m, n) = (32, 16, 1024);
    let a = dyadic(k * m, 83, -2.0, 2.0, 4);
    let b = dyadic(k * n, 84, -2.0, 2.0, 4);
    let got = Launch::new()
        .run(|ctx| {
            let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::F32, &a)?;
            let mv = sbuf_with(ctx, &[k as i64, n as i64], Dtype::F32, &b)?;
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::F32)?;
            for j in 0..2 {
                let cols = s![.., j * 512..(j + 1) * 512];
                mm(ctx, &ps.index(&cols)?, &st, &mv.index(&cols)?)?;
            }
            let held: Vec<Tensor> = (0..3).map(|_| psum(ctx, &[128, 1024], Dtype::F32)).collect::<Result<_>>()?;
            for t in &held {
                nisa::memset(ctx, t, 1.0, EngineOpts::default())?;
            }
            let extra = psum(ctx, &[1, 1], Dtype::F32)?;
            nisa::memset(ctx, &extra, 0.0, EngineOpts::default())?;
            // Tiles hold banks from first to last use: reading the held tensors and
            // `extra` again keeps them live together (7 banks), and reading `ps`
            // again proves it live with them: 2 + 3 * 2 + 1 banks.
            let col = alloc(ctx, &[128, 1], Dtype::F32, Buffer::Sbuf)?;
            for t in held.iter().chain([&extra]) {
                nisa::tensor_copy(ctx, &col.index(&s![0..t.shape()[0], ..])?, &t.index(&s![.., 0..1])?, EngineOpts::default())?;
            }
            let out = alloc(ctx, &[m as i64, n as i64], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(nisa::tensor_copy(ctx, &out, &ps, EngineOpts::default()));
            assert_err(&e, ErrorKind::Capacity, &["PSUM capacity exceeded", "8 of the 8 banks are in use"]);
            assert!(held.iter().all(|t| t.to_f32_vec().iter().all(|&v| v == 1.0)));
            Ok(ps.to_f32_vec())
        })
        .unwrap();
    assert_close(&got, &reference(&a, &b, k, m, n), 0.0, 0.0);
}

#[test]
fn trn3_accepts_a_wide_moving_operand() {
    let (k, m, n) = (4, 8, 1024);
    let a = dyadic(k * m, 81, -2.0, 2.0, 2);
    let b = dyadic(k * n, 82, -2.0, 2.0, 2);
    let got = Launch::new()
        .generation(Generation::Trn3)
        .run(|ctx| {
            let st = sbuf_with(ctx, &[k as i64, m as i64], Dtype::Bf16, &a)?;
            let mv = sbuf_with(ctx, &[k as i64, n as i64], Dtype::Bf16, &b)?;
            let ps = psum(ctx, &[m as i64, n as i64], Dtype::Bf16)?;
            mm(ctx, &ps, &st, &mv)?;
            Ok(ps.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f32> = reference(&a, &b, k, m, n).iter().map(|&v| bf16(v as f32)).collect();
    assert_bits(&got, &want);
}

fn tr(ctx: &Ctx, dst: &Tensor, data: &Tensor, e: Option<nisa::Engine>) -> Result<()> {
    nisa::nc_transpose(ctx, dst, data, NcTransposeOpts { engine: e, ..Default::default() })
}

#[test]
fn nc_transpose_pe_and_vector() {
    let vals = uniform(128 * 128, 91, -100.0, 100.0);
    Launch::new()
        .run(|ctx| {
            let data = sbuf_with(ctx, &[128, 128], Dtype::Bf16, &vals)?;
            let vals = &vals;
            let want =
                |np: usize, nf: usize| -> Vec<f32> { (0..nf).flat_map(|f| (0..np).map(move |p| bf16(vals[p * 128 + f] as f32))).collect() };
            // PE, full size, bf16 into a bf16 PSUM tile (fine on trn2 for transposes).
            let ps = psum(ctx, &[128, 128], Dtype::Bf16)?;
            tr(ctx, &ps, &data, None)?;
            assert_bits(&ps.to_f32_vec(), &want(128, 128));
            tr(ctx, &ps.index(&s![0..24, 0..16])?, &data.index(&s![0..16, 0..24])?, Some(engine::tensor))?;
            assert_bits(&ps.index(&s![0..24, 0..16])?.to_f32_vec(), &want(16, 24));
            // Vector: 32 x 32 SBUF -> SBUF and PSUM -> SBUF.
            let sb = alloc(ctx, &[32, 32], Dtype::Bf16, Buffer::Sbuf)?;
            tr(ctx, &sb, &data.index(&s![0..32, 0..32])?, None)?;
            assert_bits(&sb.to_f32_vec(), &want(32, 32));
            let back = alloc(ctx, &[20, 12], Dtype::Bf16, Buffer::Sbuf)?;
            tr(ctx, &back, &ps.index(&s![0..12, 0..20])?, Some(engine::vector))?;
            // Transposing the transpose gives back data[0..20, 0..12].
            let orig: Vec<f32> = (0..20).flat_map(|a| (0..12).map(move |b| bf16(vals[a * 128 + b] as f32))).collect();
            assert_bits(&back.to_f32_vec(), &orig);
            // A broadcast column becomes identical rows.
            let colv = data.index(&s![0..16, 5..6])?.broadcast(1, 8)?;
            let p2 = psum(ctx, &[8, 16], Dtype::Bf16)?;
            tr(ctx, &p2, &colv, None)?;
            let row: Vec<f32> = (0..16).map(|p| bf16(vals[p * 128 + 5] as f32)).collect();
            assert_bits(&p2.to_f32_vec(), &row.repeat(8));
            Ok(())
        })
        .unwrap();
}

#[test]
fn nc_transpose_limits() {
    Launch::new()
        .run(|ctx| {
            let data = sbuf_with(ctx, &[64, 129], Dtype::F32, &vec![0.0; 64 * 129])?;
            let tall = alloc(ctx, &[8, 33], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(tr(ctx, &tall, &data.index(&s![0..33, 0..8])?, Some(engine::vector)));
            assert_err(&e, ErrorKind::Constraint, &["nisa.nc_transpose", "33 x 8", "32 x 32"]);
            let v = alloc(ctx, &[33, 8], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(tr(ctx, &v, &data.index(&s![0..8, 0..33])?, None));
            assert_err(&e, ErrorKind::Constraint, &["8 x 33", "32 x 32"]);
            // The PE transpose writes PSUM only.
            let sb = alloc(ctx, &[8, 4], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(tr(ctx, &sb, &data.index(&s![0..4, 0..8])?, Some(engine::tensor)));
            assert_err(&e, ErrorKind::Constraint, &["dst", "must be in PSUM"]);
            let ps = psum(ctx, &[8, 8], Dtype::F32)?;
            let e = expect_err(tr(ctx, &ps, &ps, Some(engine::tensor)));
            assert_err(&e, ErrorKind::Constraint, &["data", "must be in SBUF"]);
            let e = expect_err(tr(ctx, &ps, &data.index(&s![0..8, 0..8])?, Some(engine::scalar)));
            assert_err(&e, ErrorKind::Constraint, &["cannot transpose"]);
            let e = expect_err(tr(ctx, &psum(ctx, &[8, 8], Dtype::Bf16)?, &data.index(&s![0..8, 0..8])?, None));
            assert_err(&e, ErrorKind::Dtype, &["float32"]);
            let e = expect_err(tr(ctx, &ps, &data.index(&s![0..8, 0..9])?, None));
            assert_err(&e, ErrorKind::Shape, &["8 x 9"]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn nc_transpose_marks_psum_written() {
    // A transpose into PSUM followed by a default matmul accumulates onto it.
    let got = Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[2, 3], Dtype::F32, &[1., 2., 3., 4., 5., 6.])?;
            let ps = psum(ctx, &[3, 2], Dtype::F32)?;
            tr(ctx, &ps, &x, None)?;
            let st = sbuf_with(ctx, &[1, 3], Dtype::F32, &[1., 1., 1.])?;
            let mv = sbuf_with(ctx, &[1, 2], Dtype::F32, &[10., 20.])?;
            mm(ctx, &ps, &st, &mv)?;
            Ok(ps.to_f32_vec())
        })
        .unwrap();
    assert_eq!(got, vec![11., 24., 12., 25., 13., 26.]);
}
