//! `activate2` against its docstring in float64: `op((data op0 imm0) op1 imm1)`
//! for the six documented stages (reversed operands, scalar and per-partition
//! immediates, PReLU's slope), the Scalar Engine reduction, and the trn3-only rule.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, Activate2Opts, Operand, reduce_cmd};
use nki_core::language::NlOp;
use nki_core::{Buffer, Dtype, ErrorKind, Launch, Precision};

fn trn3(precision: Precision) -> Launch {
    launch(precision).generation(Generation::Trn3)
}

/// `a op b` in float64 for the stage ops.
fn alu(op: NlOp, a: f64, b: f64) -> f64 {
    match op {
        NlOp::Multiply => a * b,
        NlOp::Add => a + b,
        NlOp::Subtract => a - b,
        _ => unreachable!("not a stage op"),
    }
}

/// The activation in float64.
fn act(op: NlOp, x: f64, slope: f64) -> f64 {
    match op {
        NlOp::Exp => x.exp(),
        NlOp::Tanh => x.tanh(),
        NlOp::Copy => x,
        NlOp::Prelu => {
            if x >= 0.0 {
                x
            } else {
                slope * x
            }
        }
        _ => unreachable!("not tested"),
    }
}

struct Case {
    op: NlOp,
    op0: NlOp,
    op1: NlOp,
    reverse0: bool,
    reverse1: bool,
}

#[test]
fn every_documented_stage_with_scalar_and_column_immediates_in_both_precisions() {
    let (p, f) = (16usize, 24usize);
    let x = f32_cells(&uniform(p * f, 21, -2.0, 2.0));
    let col0 = f32_cells(&uniform(p, 22, 0.5, 1.5));
    let slope = f32_cells(&uniform(p, 23, 0.05, 0.3));
    let cases = [
        Case { op: NlOp::Exp, op0: NlOp::Multiply, op1: NlOp::Add, reverse0: false, reverse1: false },
        Case { op: NlOp::Tanh, op0: NlOp::Multiply, op1: NlOp::Subtract, reverse0: false, reverse1: true },
        Case { op: NlOp::Prelu, op0: NlOp::Multiply, op1: NlOp::Bypass, reverse0: true, reverse1: false },
        Case { op: NlOp::Copy, op0: NlOp::Add, op1: NlOp::Bypass, reverse0: false, reverse1: false },
        Case { op: NlOp::Prelu, op0: NlOp::Subtract, op1: NlOp::Bypass, reverse0: true, reverse1: false },
        Case { op: NlOp::Tanh, op0: NlOp::Bypass, op1: NlOp::Bypass, reverse0: false, reverse1: false },
    ];
    let imm1 = 0.375;
    for c in &cases {
        for (precision, dtype) in [(Precision::Fp32, Dtype::F32), (Precision::Hardware, Dtype::Bf16)] {
            let got = trn3(precision)
                .run(|ctx| {
                    let t = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
                    let i0 = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &col0)?;
                    let s = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &slope)?;
                    let d = alloc(ctx, &[p as i64, f as i64], dtype, Buffer::Sbuf)?;
                    let opts = Activate2Opts {
                        relu_param: Some(Operand::Tensor(&s)),
                        reverse0: Some(c.reverse0),
                        reverse1: Some(c.reverse1),
                        ..Default::default()
                    };
                    nisa::activate2(ctx, &d, c.op, &t, Operand::Tensor(&i0), Operand::Scalar(imm1), c.op0, c.op1, opts)?;
                    Ok(d.to_f32_vec())
                })
                .unwrap();
            let want: Vec<f64> = (0..p * f)
                .map(|i| {
                    let (row, mut v) = (i / f, x[i]);
                    for (op, imm, rev) in [(c.op0, col0[i / f], c.reverse0), (c.op1, imm1, c.reverse1)] {
                        if op != NlOp::Bypass {
                            v = if rev { alu(op, imm, v) } else { alu(op, v, imm) };
                        }
                    }
                    act(c.op, v, slope[row])
                })
                .collect();
            // fp32 arithmetic, then the destination's rounding (bf16: 2^-8 relative).
            let rtol = if dtype == Dtype::Bf16 { 1.0 / 256.0 } else { 1e-6 };
            assert_close(&got, &want, rtol, 1e-6);
        }
    }
}

#[test]
fn reductions_fold_each_row_into_the_scalar_accumulators_across_calls() {
    let (p, f) = (8usize, 20usize);
    let a = f32_cells(&uniform(p * f, 31, -3.0, 3.0));
    let b = f32_cells(&uniform(p * f, 32, -3.0, 3.0));
    for (rop, name) in [(NlOp::Add, "add"), (NlOp::Maximum, "max"), (NlOp::Minimum, "min")] {
        let got = trn3(Precision::Fp32)
            .run(|ctx| {
                let ta = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
                let tb = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
                let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
                let res = alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf)?;
                let first = Activate2Opts { reduce_op: Some(rop), reduce_cmd: Some(reduce_cmd::reset_reduce), ..Default::default() };
                nisa::activate2(ctx, &d, NlOp::Copy, &ta, Operand::Scalar(2.0), Operand::Scalar(0.0), NlOp::Multiply, NlOp::Bypass, first)?;
                let second = Activate2Opts {
                    reduce_op: Some(rop),
                    reduce_res: Some(&res),
                    reduce_cmd: Some(reduce_cmd::reduce),
                    ..Default::default()
                };
                nisa::activate2(ctx, &d, NlOp::Copy, &tb, Operand::Scalar(1.0), Operand::Scalar(0.0), NlOp::Add, NlOp::Bypass, second)?;
                Ok(res.to_f32_vec())
            })
            .unwrap();
        let want: Vec<f64> = (0..p)
            .map(|r| {
                let vals = (0..f).map(|j| 2.0 * a[r * f + j]).chain((0..f).map(|j| b[r * f + j] + 1.0));
                match name {
                    "add" => vals.sum(),
                    "max" => vals.fold(f64::NEG_INFINITY, f64::max),
                    _ => vals.fold(f64::INFINITY, f64::min),
                }
            })
            .collect();
        assert_close(&got, &want, 1e-6, 1e-5);
    }
}

#[test]
fn run_time_errors_name_the_rule() {
    let run = |g: Generation, op0: NlOp, op1: NlOp, opts: Activate2Opts<'static>| {
        launch(Precision::Fp32).generation(g).run(move |ctx| {
            let t = sbuf_with(ctx, &[4, 8], Dtype::F32, &[1.0; 32])?;
            let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
            nisa::activate2(ctx, &d, NlOp::Exp, &t, Operand::Scalar(1.0), Operand::Scalar(0.0), op0, op1, opts)
        })
    };
    let ok = Activate2Opts::default();
    let e = expect_err(run(Generation::Trn2, NlOp::Multiply, NlOp::Add, ok));
    assert_err(&e, ErrorKind::Constraint, &["nisa.activate2 exists on trn3 only", "targets trn2"]);
    let e = expect_err(run(Generation::Trn3, NlOp::Add, NlOp::Add, ok));
    assert_err(&e, ErrorKind::Constraint, &["(op0, op1) = (nl.add, nl.add)", "(nl.multiply, nl.add)"]);
    let e = expect_err(run(Generation::Trn3, NlOp::Bypass, NlOp::Bypass, Activate2Opts { reverse0: Some(true), ..ok }));
    assert_err(&e, ErrorKind::Constraint, &["reverse0", "not nl.bypass"]);
    let e = expect_err(run(Generation::Trn3, NlOp::Multiply, NlOp::Add, Activate2Opts { reduce_op: Some(NlOp::Multiply), ..ok }));
    assert_err(&e, ErrorKind::Constraint, &["reduce_op=nl.multiply"]);
    let e = expect_err(run(Generation::Trn3, NlOp::Multiply, NlOp::Add, Activate2Opts { reduce_cmd: Some(reduce_cmd::load_reduce), ..ok }));
    assert_err(&e, ErrorKind::Constraint, &["load_reduce"]);
}
