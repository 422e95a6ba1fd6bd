//! `nl.zeros` / `nl.ones` / `nl.full` / `nl.load` / `nl.store`: fills rounded per
//! the precision model, loads of a tensor's shape, stores with equal counts.

use crate::common::*;
use nki_core::nl::{self, FillOpts};
use nki_core::{Buffer, Dtype, Precision};

#[test]
fn fills_hold_their_value_rounded_per_the_precision_model() {
    let third = 1.0 / 3.0;
    for (precision, want) in [(Precision::Hardware, f64::from(bf16(third as f32))), (Precision::Fp32, f64::from(third as f32))] {
        let got = launch(precision)
            .run(|ctx| {
                let z = nl::zeros(ctx, &[4, 3], Dtype::F32, FillOpts::default())?;
                let o = nl::ones(ctx, &[4, 3], Dtype::I32, FillOpts { buffer: Some(Buffer::Psum), ..Default::default() })?;
                let f = nl::full(ctx, &[2, 3], third, Dtype::Bf16, FillOpts::default())?;
                let h = nl::full(ctx, &[2, 3], third, Dtype::Bf16, FillOpts { buffer: Some(Buffer::SharedHbm), ..Default::default() })?;
                Ok((z.to_f32_vec(), o.to_i64_vec(), f.to_f32_vec(), h.to_f32_vec(), o.buffer()))
            })
            .unwrap();
        assert!(got.0.iter().all(|&v| v == 0.0));
        assert!(got.1.iter().all(|&v| v == 1) && got.4 == Buffer::Psum);
        assert_close(&got.2, &[want; 6], 0.0, 0.0);
        assert_close(&got.3, &[want; 6], 0.0, 0.0);
    }
}

#[test]
fn load_copies_into_a_new_sbuf_tile_and_store_copies_back() {
    let x = f32_cells(&uniform(32 * 5, 1, -3.0, 3.0));
    let src = hbm(&[32, 5], &x, Dtype::F32);
    let (tile, back, buffer) = launch(Precision::Hardware)
        .run(|ctx| {
            let t = nl::load(ctx, &src, Some(Dtype::Bf16))?;
            let out = alloc(ctx, &[32, 5], Dtype::F32, Buffer::SharedHbm)?;
            nl::store(ctx, &out, &t)?;
            Ok((t.to_f32_vec(), out.to_f32_vec(), t.buffer()))
        })
        .unwrap();
    let want: Vec<f64> = x.iter().map(|&v| f64::from(bf16(v as f32))).collect();
    assert_eq!(buffer, Buffer::Sbuf);
    assert_close(&tile, &want, 0.0, 0.0);
    assert_close(&back, &want, 0.0, 0.0);
}
