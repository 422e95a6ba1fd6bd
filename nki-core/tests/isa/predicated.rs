//! `tensor_copy_predicated` against its documented behaviour: copy where the
//! predicate is nonzero (zero with `reverse_pred`), keep `dst` elsewhere.

use crate::common::*;
use nki_core::isa::{self as nisa, CopyPredicatedOpts, DmaCopyOpts, Operand};
use nki_core::{Buffer, Dtype, ErrorKind, Precision, Tensor};

#[test]
fn copies_where_the_predicate_holds_and_keeps_dst_elsewhere() {
    let (p, f) = (8usize, 12usize);
    let src = f32_cells(&uniform(p * f, 1, -5.0, 5.0));
    let old = f32_cells(&uniform(p * f, 2, -5.0, 5.0));
    let mask: Vec<f64> = (0..p * f).map(|i| [0.0, 1.0, 7.0, 0.0, 255.0][i % 5]).collect();
    for reverse in [false, true] {
        for scalar in [false, true] {
            let got = launch(Precision::Hardware)
                .run(|ctx| {
                    let s = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &src)?;
                    let d = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &old)?;
                    let m = sbuf_with(ctx, &[p as i64, f as i64], Dtype::U8, &mask)?;
                    let value = if scalar { Operand::Scalar(2.5) } else { Operand::Tensor(&s) };
                    nisa::tensor_copy_predicated(
                        ctx,
                        &d,
                        value,
                        &m,
                        CopyPredicatedOpts { reverse_pred: Some(reverse), ..Default::default() },
                    )?;
                    Ok(d.to_f32_vec())
                })
                .unwrap();
            let want: Vec<f64> =
                (0..p * f).map(|i| if (mask[i] != 0.0) != reverse { if scalar { 2.5 } else { src[i] } } else { old[i] }).collect();
            assert_close(&got, &want, 0.0, 0.0);
        }
    }
}

#[test]
fn integer_cells_move_exactly() {
    // 2^24 + 1 is not an f32: a copy through f32 would change it.
    let big = f64::from((1 << 24) + 1);
    let src = Tensor::from_i64(&[1, 2], &[(1 << 24) + 1, -3], Dtype::I32).unwrap();
    let zeros = Tensor::from_i64(&[1, 2], &[0, 0], Dtype::I32).unwrap();
    let got = launch(Precision::Hardware)
        .run(|ctx| {
            let s = alloc(ctx, &[1, 2], Dtype::I32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &s, &src, DmaCopyOpts::default())?;
            let d = alloc(ctx, &[1, 2], Dtype::I32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &d, &zeros, DmaCopyOpts::default())?;
            let m = sbuf_with(ctx, &[1, 2], Dtype::U32, &[1.0, 0.0])?;
            nisa::tensor_copy_predicated(ctx, &d, Operand::Tensor(&s), &m, CopyPredicatedOpts::default())?;
            Ok(d.to_i64_vec())
        })
        .unwrap();
    assert_eq!(got, vec![big as i64, 0]);
}

#[test]
fn refuses_float_predicates_and_mixed_dtypes() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::tensor_copy_predicated(ctx, &d, Operand::Scalar(1.0), &d, CopyPredicatedOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["nisa.tensor_copy_predicated", "uint8, uint16 or uint32"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        let s = alloc(ctx, &[4, 8], Dtype::Bf16, Buffer::Sbuf)?;
        let m = alloc(ctx, &[4, 8], Dtype::U8, Buffer::Sbuf)?;
        nisa::tensor_copy_predicated(ctx, &d, Operand::Tensor(&s), &m, CopyPredicatedOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["share a dtype"]);
}
