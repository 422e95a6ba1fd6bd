//! `exponential` against its documented behaviour in float64: `exp(src - max_value)`,
//! and the accumulator commands summing the results per partition.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, ExponentialOpts, Operand, reduce_cmd};
use nki_core::{Buffer, Dtype, ErrorKind, Launch, Precision};

fn trn3(precision: Precision) -> Launch {
    launch(precision).generation(Generation::Trn3)
}

#[test]
fn exp_of_shifted_values_and_running_sums_over_two_calls() {
    let (p, f) = (16usize, 40usize);
    let a = f32_cells(&uniform(p * f, 1, -4.0, 2.0));
    let b = f32_cells(&uniform(p * f, 2, -4.0, 2.0));
    let max = f32_cells(&uniform(p, 3, 0.0, 2.0));
    for (precision, dtype, tol) in [(Precision::Fp32, Dtype::F32, 2e-6), (Precision::Hardware, Dtype::Bf16, 8e-3)] {
        let (ea, sums) = trn3(precision)
            .run(|ctx| {
                let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
                let y = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
                let m = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &max)?;
                let (dx, dy) =
                    (alloc(ctx, &[p as i64, f as i64], dtype, Buffer::Sbuf)?, alloc(ctx, &[p as i64, f as i64], dtype, Buffer::Sbuf)?);
                let res = alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf)?;
                let first = ExponentialOpts {
                    max_value: Some(Operand::Tensor(&m)),
                    reduce_cmd: Some(reduce_cmd::reset_reduce),
                    ..Default::default()
                };
                nisa::exponential(ctx, &dx, &x, first)?;
                let second = ExponentialOpts {
                    max_value: Some(Operand::Scalar(1.0)),
                    reduce_cmd: Some(reduce_cmd::reduce),
                    reduce_res: Some(&res),
                    ..Default::default()
                };
                nisa::exponential(ctx, &dy, &y, second)?;
                Ok((dx.to_f32_vec(), res.to_f32_vec()))
            })
            .unwrap();
        let want: Vec<f64> = a.iter().enumerate().map(|(i, v)| (v - max[i / f]).exp()).collect();
        assert_close(&ea, &want, tol, tol);
        let want_sums: Vec<f64> =
            (0..p).map(|r| (0..f).map(|j| (a[r * f + j] - max[r]).exp() + (b[r * f + j] - 1.0).exp()).sum()).collect();
        // The sums are of fp32 results, before dst's rounding, in both modes.
        assert_close(&sums, &want_sums, 1e-5, 1e-5);
    }
}

#[test]
fn load_reduce_starts_from_reduce_init() {
    let (p, f) = (4usize, 8usize);
    let x = f32_cells(&uniform(p * f, 4, -1.0, 1.0));
    let got = trn3(Precision::Fp32)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
            let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
            let res = alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf)?;
            let opts = ExponentialOpts {
                reduce_cmd: Some(reduce_cmd::load_reduce),
                reduce_init: Some(Operand::Scalar(10.0)),
                reduce_res: Some(&res),
                ..Default::default()
            };
            nisa::exponential(ctx, &d, &t, opts)?;
            Ok(res.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f64> = x.chunks(f).map(|r| 10.0 + r.iter().map(|v| v.exp()).sum::<f64>()).collect();
    assert_close(&got, &want, 1e-6, 1e-6);
}

#[test]
fn exponential_is_trn3_only_and_checks_reduce_init() {
    let run = |g: Generation, opts: fn(&nki_core::Tensor) -> ExponentialOpts<'_>| {
        launch(Precision::Fp32).generation(g).run(move |ctx| {
            let t = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &t, 0.0, Default::default())?;
            nisa::exponential(ctx, &t, &t, opts(&t))
        })
    };
    let e = expect_err(run(Generation::Trn2, |_| ExponentialOpts::default()));
    assert_err(&e, ErrorKind::Constraint, &["nisa.exponential exists on trn3 only", "targets trn2"]);
    let e = expect_err(run(Generation::Trn3, |_| ExponentialOpts { reduce_init: Some(Operand::Scalar(2.0)), ..Default::default() }));
    assert_err(&e, ErrorKind::Constraint, &["reduce_init=2", "load_reduce only"]);
}
