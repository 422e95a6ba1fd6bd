//! `select_reduce` against its documented NumPy form: `where(predicate, on_true,
//! on_false)` (predicate inverted by `reverse_pred`) and the row maxima on the
//! accumulators.

use crate::common::*;
use nki_core::isa::{self as nisa, Operand, SelectReduceOpts, reduce_cmd};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[test]
fn selects_and_keeps_a_running_row_maximum() {
    let (p, f) = (8usize, 20usize);
    let x = f32_cells(&uniform(p * f, 1, -3.0, 3.0));
    let y = f32_cells(&uniform(p * f, 2, -3.0, 3.0));
    let fill = f32_cells(&uniform(p, 3, -5.0, -4.0));
    let mask: Vec<f64> = (0..p * f).map(|i| f64::from(u8::from(i % 3 != 0))).collect();
    for reverse in [false, true] {
        let (dx, res) = launch(Precision::Fp32)
            .run(|ctx| {
                let m = sbuf_with(ctx, &[p as i64, f as i64], Dtype::U8, &mask)?;
                let tx = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
                let ty = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &y)?;
                let c = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &fill)?;
                let (dx, dy) = (
                    alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?,
                    alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?,
                );
                let res = alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf)?;
                let first =
                    SelectReduceOpts { reduce_cmd: Some(reduce_cmd::reset_reduce), reverse_pred: Some(reverse), ..Default::default() };
                nisa::select_reduce(ctx, &dx, &m, &tx, Operand::Tensor(&c), first)?;
                let second = SelectReduceOpts {
                    reduce_cmd: Some(reduce_cmd::reduce),
                    reduce_res: Some(&res),
                    reverse_pred: Some(reverse),
                    ..Default::default()
                };
                nisa::select_reduce(ctx, &dy, &m, &ty, Operand::Scalar(-10.0), second)?;
                Ok((dx.to_f32_vec(), res.to_f32_vec()))
            })
            .unwrap();
        let pick = |i: usize, v: &[f64], other: f64| if (mask[i] != 0.0) != reverse { v[i] } else { other };
        let want: Vec<f64> = (0..p * f).map(|i| pick(i, &x, fill[i / f])).collect();
        assert_close(&dx, &want, 0.0, 0.0);
        let want_res: Vec<f64> = (0..p)
            .map(|r| (0..f).map(|j| pick(r * f + j, &x, fill[r]).max(pick(r * f + j, &y, -10.0))).fold(f64::NEG_INFINITY, f64::max))
            .collect();
        assert_close(&res, &want_res, 0.0, 0.0);
    }
}

#[test]
fn refuses_other_reductions_and_float_predicates() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        let m = alloc(ctx, &[4, 8], Dtype::U8, Buffer::Sbuf)?;
        nisa::select_reduce(
            ctx,
            &t,
            &m,
            &t,
            Operand::Scalar(0.0),
            SelectReduceOpts { reduce_op: Some(nki_core::nl::add), ..Default::default() },
        )
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.select_reduce", "nl.maximum"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::select_reduce(ctx, &t, &t, &t, Operand::Scalar(0.0), SelectReduceOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["int8, uint8, int16 or uint16"]);
}
