//! `tensor_scalar_cumulative` against its documented pseudocode in float64:
//! `reg = op1(op0(src[i], imm0), reg)`, `dst[i] = reg`, the register started by
//! `reduce_cmd`.

use crate::common::*;
use nki_core::isa::{self as nisa, Operand, TensorScalarCumulativeOpts, reduce_cmd};
use nki_core::nl::{self, NlOp};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

fn reference(x: &[f64], f: usize, op0: NlOp, op1: NlOp, imm0: f64, start: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut out = Vec::new();
    let mut last = Vec::new();
    for (row, &s) in x.chunks(f).zip(start) {
        let mut reg = s;
        for &v in row {
            reg = alu(op1, alu(op0, v, imm0), reg);
            out.push(reg);
        }
        last.push(reg);
    }
    (out, last)
}

#[test]
fn running_reductions_follow_the_pseudocode_and_continue_with_reduce() {
    let (p, f) = (8usize, 30usize);
    let x = f32_cells(&uniform(p * f, 1, 0.5, 1.5));
    let y = f32_cells(&uniform(p * f, 2, 0.5, 1.5));
    let init = f32_cells(&uniform(p, 3, -1.0, 1.0));
    let cases = [
        (nl::multiply, nl::add, 0.0),
        (nl::add, nl::subtract, 0.0),
        (nl::subtract, nl::multiply, 1.0),
        (nl::multiply, nl::maximum, f64::NEG_INFINITY),
        (nl::add, nl::minimum, f64::INFINITY),
    ];
    for (op0, op1, reset) in cases {
        let (a, b) = launch(Precision::Fp32)
            .run(|ctx| {
                let tx = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
                let ty = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &y)?;
                let (da, db) = (
                    alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?,
                    alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?,
                );
                nisa::tensor_scalar_cumulative(ctx, &da, &tx, op0, op1, Operand::Scalar(0.75), TensorScalarCumulativeOpts::default())?;
                let more = TensorScalarCumulativeOpts { reduce_cmd: Some(reduce_cmd::reduce), ..Default::default() };
                nisa::tensor_scalar_cumulative(ctx, &db, &ty, op0, op1, Operand::Scalar(0.75), more)?;
                Ok((da.to_f32_vec(), db.to_f32_vec()))
            })
            .unwrap();
        let (want_a, last) = reference(&x, f, op0, op1, 0.75, &vec![reset; p]);
        let (want_b, _) = reference(&y, f, op0, op1, 0.75, &last);
        assert_close(&a, &want_a, 1e-5, 1e-5);
        assert_close(&b, &want_b, 1e-5, 1e-5);
    }
    // load_reduce from a per-partition column.
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let tx = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
            let c = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &init)?;
            let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
            let opts = TensorScalarCumulativeOpts {
                reduce_cmd: Some(reduce_cmd::load_reduce),
                imm1: Some(Operand::Tensor(&c)),
                ..Default::default()
            };
            nisa::tensor_scalar_cumulative(ctx, &d, &tx, nl::multiply, nl::add, Operand::Scalar(2.0), opts)?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    assert_close(&got, &reference(&x, f, nl::multiply, nl::add, 2.0, &init).0, 1e-5, 1e-5);
}

#[test]
fn refuses_other_accumulations_and_int32_tiles() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::tensor_scalar_cumulative(ctx, &t, &t, nl::add, nl::divide, Operand::Scalar(1.0), TensorScalarCumulativeOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["op1 nl.divide cannot accumulate"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 8], Dtype::I32, Buffer::Sbuf)?;
        nisa::tensor_scalar_cumulative(ctx, &t, &t, nl::add, nl::add, Operand::Scalar(1.0), TensorScalarCumulativeOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["32-bit integer"]);
}
