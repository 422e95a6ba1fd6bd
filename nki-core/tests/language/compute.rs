//! The computing `nl` tile functions' run-time rules: result dtypes of mixed
//! operands, the broadcasts the lowering supports, and errors naming the function,
//! the operand and the limit.

use crate::common::*;
use nki_core::isa::Operand;
use nki_core::nl::{self, elementwise as ew};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[test]
fn mixed_operands_take_the_documented_result_dtype() {
    let cases = [
        (Dtype::Bf16, Dtype::Bf16, Dtype::Bf16),
        (Dtype::Bf16, Dtype::F32, Dtype::F32),
        (Dtype::Bf16, Dtype::F16, Dtype::F32),
        (Dtype::I16, Dtype::Bf16, Dtype::Bf16),
        (Dtype::I32, Dtype::U32, Dtype::I32),
        (Dtype::I8, Dtype::I16, Dtype::I16),
    ];
    for (a, b, want) in cases {
        let got = launch(Precision::Hardware)
            .run(|ctx| {
                let x = sbuf_with(ctx, &[4, 3], a, &[1.0; 12])?;
                let y = sbuf_with(ctx, &[4, 3], b, &[2.0; 12])?;
                Ok(ew::add(ctx, Operand::Tensor(&x), Operand::Tensor(&y), None)?.dtype())
            })
            .unwrap();
        assert_eq!(got, want, "{a:?} + {b:?}");
    }
}

#[test]
fn numbers_and_broadcast_operands_keep_their_side() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let (rev, col, row) = launch(Precision::Fp32)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[2, 3], Dtype::F32, &x)?;
            let c = sbuf_with(ctx, &[2, 1], Dtype::F32, &[10.0, 20.0])?;
            let r = sbuf_with(ctx, &[1, 3], Dtype::F32, &[100.0, 200.0, 300.0])?;
            let rev = ew::subtract(ctx, Operand::Scalar(1.0), Operand::Tensor(&t), None)?;
            let col = ew::divide(ctx, Operand::Tensor(&c), Operand::Tensor(&t), None)?;
            let row = ew::subtract(ctx, Operand::Tensor(&t), Operand::Tensor(&r), Some(Dtype::Bf16))?;
            Ok((rev.to_f32_vec(), col.to_f32_vec(), (row.to_f32_vec(), row.dtype(), row.shape().to_vec())))
        })
        .unwrap();
    assert_close(&rev, &[0.0, -1.0, -2.0, -3.0, -4.0, -5.0], 0.0, 0.0);
    assert_close(&col, &[10.0, 5.0, 10.0 / 3.0, 5.0, 4.0, 20.0 / 6.0], 1e-7, 0.0);
    assert_close(&row.0, &[-99.0, -198.0, -297.0, -96.0, -195.0, -294.0], 0.0, 0.0);
    assert_eq!((row.1, row.2), (Dtype::Bf16, vec![2, 3]));
}

#[test]
fn unsupported_operands_are_errors_naming_them() {
    let e = expect_err(launch(Precision::Hardware).run(|ctx| {
        let a = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        let b = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
        ew::add(ctx, Operand::Tensor(&a), Operand::Tensor(&b), None)
    }));
    assert_err(&e, ErrorKind::Shape, &["nl.add", "[4, 8]", "[4, 6]", "(P, 1) column", "(1, F) row"]);
    let e = expect_err(launch(Precision::Hardware).run(|ctx| ew::maximum(ctx, Operand::Scalar(1.0), Operand::Scalar(2.0), None)));
    assert_err(&e, ErrorKind::Constraint, &["nl.maximum", "both numbers"]);
    let h = hbm(&[4, 8], &[0.0; 32], Dtype::F32);
    let e = expect_err(launch(Precision::Hardware).run(|ctx| ew::exp(ctx, &h, None)));
    assert_err(&e, ErrorKind::Constraint, &["nl.exp", "x", "SBUF or PSUM"]);
    let e = expect_err(launch(Precision::Hardware).run(|ctx| ew::multiply(ctx, Operand::Scalar(2.0), Operand::Tensor(&h), None)));
    assert_err(&e, ErrorKind::Constraint, &["nl.multiply", "y", "SBUF or PSUM"]);
}

#[test]
fn tensor_engine_calls_check_their_operands() {
    let e = expect_err(launch(Precision::Hardware).run(|ctx| {
        let x = alloc(ctx, &[64, 32], Dtype::F32, Buffer::Sbuf)?;
        let y = alloc(ctx, &[64, 16], Dtype::F32, Buffer::Sbuf)?;
        nl::matmul(ctx, &x, &y, Some(false))
    }));
    assert_err(&e, ErrorKind::Shape, &["nl.matmul", "free size 32", "64 partitions"]);
    let e = expect_err(launch(Precision::Hardware).run(|ctx| {
        let x = alloc(ctx, &[64, 32], Dtype::F32, Buffer::Psum)?;
        let y = alloc(ctx, &[64, 16], Dtype::F32, Buffer::Sbuf)?;
        nl::matmul(ctx, &x, &y, Some(true))
    }));
    assert_err(&e, ErrorKind::Constraint, &["nl.matmul", "x", "2-d SBUF tile"]);
    let e = expect_err(launch(Precision::Hardware).run(|ctx| {
        let x = alloc(ctx, &[128, 256], Dtype::Bf16, Buffer::Sbuf)?;
        nl::transpose(ctx, &x, None)
    }));
    assert_err(&e, ErrorKind::Constraint, &["nl.transpose", "at most 128 x 128"]);
}

#[test]
fn transpose_casts_into_the_asked_dtype_in_psum() {
    let vals: Vec<f64> = (0..6).map(|i| 1.0 + f64::from(i) / 3.0).collect();
    let (t, dtype, buffer) = launch(Precision::Hardware)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[2, 3], Dtype::F32, &vals)?;
            let t = nl::transpose(ctx, &x, Some(Dtype::Bf16))?;
            Ok((t.to_f32_vec(), t.dtype(), t.buffer()))
        })
        .unwrap();
    let want: Vec<f64> = [0, 3, 1, 4, 2, 5].iter().map(|&i| f64::from(bf16(vals[i] as f32))).collect();
    assert_eq!((dtype, buffer), (Dtype::Bf16, Buffer::Psum));
    assert_close(&t, &want, 0.0, 0.0);
}

#[test]
fn reductions_name_the_axes_they_cannot_reduce_and_drop_or_keep_the_rest() {
    let e = expect_err(launch(Precision::Hardware).run(|ctx| {
        let x = alloc(ctx, &[4, 8, 2], Dtype::F32, Buffer::Sbuf)?;
        nl::reductions::sum(ctx, &x, &[1], None, None)
    }));
    assert_err(&e, ErrorKind::Constraint, &["nl.sum", "axis [1]", "last free dims"]);
    let h = hbm(&[4, 8], &[0.0; 32], Dtype::F32);
    let e = expect_err(launch(Precision::Hardware).run(|ctx| nl::reductions::max(ctx, &h, &[1], None, None)));
    assert_err(&e, ErrorKind::Constraint, &["nl.max", "SBUF or PSUM"]);
    let shapes = launch(Precision::Hardware)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[4, 8, 2], Dtype::F32, &[1.0; 64])?;
            let dropped = nl::reductions::mean(ctx, &x, &[-1], None, None)?;
            let kept = nl::reductions::min(ctx, &x, &[1, 2], Some(Dtype::Bf16), Some(true))?;
            Ok((dropped.shape().to_vec(), dropped.to_f32_vec(), kept.shape().to_vec(), kept.dtype()))
        })
        .unwrap();
    assert_eq!((shapes.0, shapes.2, shapes.3), (vec![4, 8], vec![4, 1, 1], Dtype::Bf16));
    assert!(shapes.1.iter().all(|&v| v == 1.0));
}
