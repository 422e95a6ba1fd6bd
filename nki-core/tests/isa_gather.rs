//! `nc_n_gather` against its documented meaning: per partition, the elements
//! of `data`'s flattened free dims at `indices`.

mod common;

use common::*;
use nki_core::isa::{self as nisa, NameOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[test]
fn gathers_flattened_free_elements_per_partition() {
    let (p, a, b, n) = (8usize, 4usize, 6usize, 10usize);
    let data = f32_cells(&uniform(p * a * b, 1, -9.0, 9.0));
    let idx: Vec<f64> = uniform(p * n, 2, 0.0, (a * b) as f64).iter().map(|v| v.floor()).collect();
    let got = launch(Precision::Hardware)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, a as i64, b as i64], Dtype::F32, &data)?;
            let i = sbuf_with(ctx, &[p as i64, 2, (n / 2) as i64], Dtype::U32, &idx)?;
            let d = alloc(ctx, &[p as i64, 2, (n / 2) as i64], Dtype::F32, Buffer::Sbuf)?;
            nisa::nc_n_gather(ctx, &d, &x, &i, NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f64> = (0..p * n).map(|k| data[(k / n) * a * b + idx[k] as usize]).collect();
    assert_close(&got, &want, 0.0, 0.0);
}

#[test]
fn refuses_indices_past_the_partition_and_float_indices() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let x = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
        let i = sbuf_with(ctx, &[2, 2], Dtype::U32, &[0.0, 1.0, 3.0, 4.0])?;
        let d = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
        nisa::nc_n_gather(ctx, &d, &x, &i, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["index 4 in partition 1", "4 elements"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let x = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
        nisa::nc_n_gather(ctx, &x, &x, &x, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["uint32"]);
}
