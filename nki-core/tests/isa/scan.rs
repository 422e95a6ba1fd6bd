//! `tensor_tensor_scan` against the documented recurrence in float64:
//! `r[i] = (data0[i] op0 r[i-1]) op1 data1[i]`, `r[-1] = initial`, operands
//! swapped by `reverse0` / `reverse1`.

use crate::common::*;
use nki_core::isa::{self as nisa, Operand, TensorTensorScanOpts};
use nki_core::nl::{self, NlOp};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[allow(clippy::too_many_arguments)]
fn reference(d0: &[f64], d1: &[f64], init: &[f64], f: usize, op0: NlOp, op1: NlOp, r0: bool, r1: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(d0.len());
    for (p, (a, b)) in d0.chunks(f).zip(d1.chunks(f)).enumerate() {
        let mut acc = init[p];
        for (&x0, &x1) in a.iter().zip(b) {
            let t = if r0 { alu(op0, acc, x0) } else { alu(op0, x0, acc) };
            acc = if r1 { alu(op1, x1, t) } else { alu(op1, t, x1) };
            out.push(acc);
        }
    }
    out
}

#[test]
fn scan_follows_the_recurrence_with_scalar_and_column_initial_values() {
    let (p, f) = (16usize, 50usize);
    let d0 = f32_cells(&uniform(p * f, 1, 0.5, 1.0));
    let d1 = f32_cells(&uniform(p * f, 2, -1.0, 1.0));
    let col = f32_cells(&uniform(p, 3, -2.0, 2.0));
    let cases = [
        (nl::multiply, nl::add, false, false),
        (nl::subtract, nl::subtract, true, false),
        (nl::subtract, nl::subtract, false, true),
        (nl::add, nl::maximum, false, false),
    ];
    for (op0, op1, r0, r1) in cases {
        for per_partition in [false, true] {
            let got = launch(Precision::Fp32)
                .run(|ctx| {
                    let a = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &d0)?;
                    let b = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &d1)?;
                    let c = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &col)?;
                    let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
                    let init = if per_partition { Operand::Tensor(&c) } else { Operand::Scalar(0.75) };
                    let opts = TensorTensorScanOpts { reverse0: Some(r0), reverse1: Some(r1), ..Default::default() };
                    nisa::tensor_tensor_scan(ctx, &d, &a, &b, init, op0, op1, opts)?;
                    Ok(d.to_f32_vec())
                })
                .unwrap();
            let init: Vec<f64> = if per_partition { col.clone() } else { vec![0.75; p] };
            assert_close(&got, &reference(&d0, &d1, &init, f, op0, op1, r0, r1), 1e-5, 1e-5);
        }
    }
}

#[test]
fn hardware_mode_rounds_only_the_outputs() {
    // A running sum of 200 values: rounding the state to bf16 at each step would drift far
    // beyond one final bf16 rounding.
    let (p, f) = (8usize, 200usize);
    let d1 = f32_cells(&uniform(p * f, 4, 0.0, 1.0));
    let got = launch(Precision::Hardware)
        .run(|ctx| {
            let ones = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &vec![1.0; p * f])?;
            let b = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &d1)?;
            let d = alloc(ctx, &[p as i64, f as i64], Dtype::Bf16, Buffer::Sbuf)?;
            nisa::tensor_tensor_scan(ctx, &d, &ones, &b, Operand::Scalar(0.0), nl::multiply, nl::add, TensorTensorScanOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    let sums = reference(&vec![1.0; p * f], &d1, &vec![0.0; p], f, nl::multiply, nl::add, false, false);
    let want: Vec<f64> = sums.iter().map(|&s| f64::from(bf16(s as f32))).collect();
    assert_close(&got, &want, 0.0, 0.0);
}

#[test]
fn scan_refuses_two_psum_inputs_and_unary_operators() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let a = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Psum)?;
        let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::tensor_tensor_scan(ctx, &d, &a, &a, Operand::Scalar(0.0), nl::multiply, nl::add, TensorTensorScanOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_tensor_scan", "both in PSUM"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let a = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::tensor_tensor_scan(ctx, &a, &a, &a, Operand::Scalar(0.0), nl::exp, nl::add, TensorTensorScanOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["op0", "nl.exp", "not a binary"]);
}
