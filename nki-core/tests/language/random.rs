//! `nl.rand`, `nl.random_seed` and `nl.dropout` against the reference XORWOW of
//! `common::xorwow`: on-chip rows draw from their Vector lanes, an HBM tensor from
//! lane 0; uniform statistics, reseeding, the dtype cast of `nl.dropout`.

use crate::common::xorwow::*;
use crate::common::*;
use nki_core::isa::Operand;
use nki_core::nl::{self, FillOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[test]
fn rand_rows_draw_from_their_lanes_and_are_uniform() {
    // 128 x 512 = 65536 draws of U(0, 1): mean within 5 standard deviations
    // (1 / sqrt(12 n) ~ 0.00113), variance within 2 % of 1/12.
    let (np, nf) = (128usize, 512usize);
    let got =
        launch(Precision::Fp32).run(|ctx| Ok(nl::rand(ctx, &[np as i64, 8, 64], Dtype::F32, FillOpts::default())?.to_f32_vec())).unwrap();
    let want: Vec<f64> = draws(&mut seeded_lanes(0, np, 4), nf).into_iter().map(uniform01).collect();
    assert_close(&got, &want, 0.0, 0.0);
    let xs: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    assert!((mean - 0.5).abs() < 5.0 / (12.0 * n).sqrt(), "mean {mean}");
    assert!((var * 12.0 - 1.0).abs() < 0.02, "variance {var}");
    assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
}

#[test]
fn rand_in_hbm_draws_from_lane_zero_and_rounds_in_hardware_precision() {
    for precision in [Precision::Fp32, Precision::Hardware] {
        let got = launch(precision)
            .run(|ctx| {
                let opts = FillOpts { buffer: Some(Buffer::SharedHbm), name: None };
                Ok(nl::rand(ctx, &[3, 10], Dtype::Bf16, opts)?.to_f32_vec())
            })
            .unwrap();
        let mut lane0 = seeded_lanes(0, 1, 4);
        let want: Vec<f64> = draws(&mut lane0, 30)
            .into_iter()
            .map(|b| if precision == Precision::Hardware { f64::from(bf16(uniform01(b) as f32)) } else { uniform01(b) })
            .collect();
        assert_close(&got, &want, 0.0, 0.0);
    }
}

#[test]
fn random_seed_repeats_the_sequence_and_dropout_casts() {
    let (np, nf) = (64usize, 32usize);
    let got = launch(Precision::Hardware)
        .run(|ctx| {
            let seed = sbuf_with(ctx, &[1, 1], Dtype::I32, &[42.0])?;
            nl::random_seed(ctx, &seed)?;
            let a = nl::rand(ctx, &[np as i64, nf as i64], Dtype::F32, FillOpts::default())?;
            nl::random_seed(ctx, &seed)?;
            let b = nl::rand(ctx, &[np as i64, nf as i64], Dtype::F32, FillOpts::default())?;
            // The draws after b's: a dropout of a at per-row rates, cast to bf16.
            let rates = sbuf_with(ctx, &[np as i64, 1], Dtype::F32, &(0..np).map(|p| (p % 3) as f64 / 2.0).collect::<Vec<_>>())?;
            let d = nl::dropout(ctx, &a, Operand::Tensor(&rates), Some(Dtype::Bf16))?;
            assert_eq!((d.dtype(), d.buffer(), d.shape()), (Dtype::Bf16, Buffer::Sbuf, &[np, nf][..]));
            Ok((a.to_f32_vec(), b.to_f32_vec(), d.to_f32_vec()))
        })
        .unwrap();
    let mut gens = seeded_lanes(42, np, 4);
    let a: Vec<f64> = draws(&mut gens, nf).into_iter().map(uniform01).collect();
    assert_close(&got.0, &a, 0.0, 0.0);
    assert_close(&got.1, &a, 0.0, 0.0);
    let keep = draws(&mut gens, nf);
    let want: Vec<f64> = (0..np * nf)
        .map(|i| {
            let rate = f64::from(((i / nf) % 3) as f32 / 2.0);
            if uniform01(keep[i]) >= rate { f64::from(bf16(a[i] as f32)) } else { 0.0 }
        })
        .collect();
    assert_close(&got.2, &want, 0.0, 0.0);
}

#[test]
fn refuses_documented_violations() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| nl::random_seed(ctx, &alloc(ctx, &[1, 1], Dtype::I16, Buffer::Sbuf)?)));
    assert_err(&e, ErrorKind::Shape, &["nl.random_seed", "seed", "32-bit"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let x = hbm(&[4, 4], &[0.0; 16], Dtype::F32);
        nl::dropout(ctx, &x, Operand::Scalar(0.5), None)
    }));
    assert_err(&e, ErrorKind::Constraint, &["nl.dropout", "x", "SBUF or PSUM"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let x = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
        let r = alloc(ctx, &[2, 1], Dtype::F32, Buffer::Sbuf)?;
        nl::dropout(ctx, &x, Operand::Tensor(&r), None)
    }));
    assert_err(&e, ErrorKind::Shape, &["rate", "(4, 1) column"]);
}
