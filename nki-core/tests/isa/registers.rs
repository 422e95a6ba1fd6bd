//! Virtual registers: `register_alloc/move/load/store` and registers or one-element
//! tiles as the dynamic `scalar_offset` of `.ap()`.

use crate::common::*;
use nki_core::isa::{self as nisa, DynamicOffset, RegisterSource};
use nki_core::{Buffer, Dtype, ErrorKind, Launch, Precision, Tensor};

#[test]
fn alloc_move_and_32_bit_wrap() {
    let got = Launch::new()
        .run(|ctx| {
            let a = nisa::register_alloc(ctx, Some(42))?;
            let b = nisa::register_alloc(ctx, None)?;
            let v0 = (a.value(), b.value());
            nisa::register_move(ctx, &b, (&a).into())?;
            let v1 = b.value();
            nisa::register_move(ctx, &a, RegisterSource::Immediate(-7))?;
            // b holds a copy, not an alias.
            let v2 = (a.value(), b.value());
            nisa::register_move(ctx, &a, ((1i64 << 32) + 5).into())?;
            let v3 = a.value();
            nisa::register_move(ctx, &a, ((1i64 << 31) + 1).into())?;
            Ok((v0, v1, v2, v3, a.value()))
        })
        .unwrap();
    assert_eq!(got.0, (42, 0));
    assert_eq!(got.1, 42);
    assert_eq!(got.2, (-7, 42));
    assert_eq!(got.3, 5);
    assert_eq!(got.4, i32::MIN as i64 + 1);
}

#[test]
fn load_and_store_through_one_element_tensors() {
    let run = |precision: Precision| {
        launch(precision)
            .run(|ctx| {
                let src = alloc(ctx, &[1, 1], Dtype::I32, Buffer::Sbuf)?;
                nisa::dma_copy(ctx, &src, &Tensor::from_i64(&[1, 1], &[-123_456_789], Dtype::I32)?, Default::default())?;
                let r = nisa::register_alloc(ctx, None)?;
                nisa::register_load(ctx, &r, &src)?;
                let loaded = r.value();
                let h = Tensor::from_i64(&[1], &[77], Dtype::U32)?;
                nisa::register_load(ctx, &r, &h)?;
                let from_hbm = r.value();
                nisa::register_move(ctx, &r, 257.into())?;
                let i = alloc(ctx, &[1], Dtype::I32, Buffer::Sbuf)?;
                let f = alloc(ctx, &[1, 1], Dtype::F32, Buffer::Sbuf)?;
                let b = alloc(ctx, &[1, 1], Dtype::Bf16, Buffer::Sbuf)?;
                for t in [&i, &f, &b] {
                    nisa::register_store(ctx, t, &r)?;
                }
                let big = alloc(ctx, &[1, 2], Dtype::I32, Buffer::Sbuf)?;
                let e = expect_err(nisa::register_load(ctx, &r, &big));
                assert_err(&e, ErrorKind::Shape, &["nisa.register_load", "exactly one element"]);
                let ps = alloc(ctx, &[1, 1], Dtype::I32, Buffer::Psum)?;
                let e = expect_err(nisa::register_store(ctx, &ps, &r));
                assert_err(&e, ErrorKind::Constraint, &["nisa.register_store", "SBUF or HBM"]);
                Ok((loaded, from_hbm, i.to_i64_vec()[0], f.to_f32_vec()[0], b.to_f32_vec()[0]))
            })
            .unwrap()
    };
    let hw = run(Precision::Hardware);
    assert_eq!((hw.0, hw.1, hw.2, hw.3), (-123_456_789, 77, 257, 257.0));
    assert_eq!(hw.4, bf16(257.0));
    assert_eq!(run(Precision::Fp32).4, 257.0);
}

#[test]
fn registers_and_tiles_drive_ap_scalar_offsets() {
    let table = hbm(&[1, 6], &[10.0, 11.0, 12.0, 13.0, 14.0, 15.0], Dtype::F32);
    let rows = hbm(&[4, 3], &arange(12), Dtype::F32);
    let got = Launch::new()
        .run(|ctx| {
            // The ring-attention idiom: read entry `rank` of an iota table.
            let r = nisa::register_alloc(ctx, Some(4))?;
            let entry = table.ap(&[[1, 1], [1, 1]], Some(0), Some(r.offset_value()?), 1)?;
            // A (1, 1) SBUF tile as the offset, moving whole rows (indirect_dim 0).
            let idx = alloc(ctx, &[1, 1], Dtype::U32, Buffer::Sbuf)?;
            nisa::register_store(ctx, &idx, &nisa::register_alloc(ctx, Some(2))?)?;
            let row = rows.ap(&[[1, 3]], Some(0), Some(idx.offset_value()?), 0)?;
            let e = expect_err(alloc(ctx, &[1, 2], Dtype::U32, Buffer::Sbuf)?.offset_value());
            assert_err(&e, ErrorKind::Shape, &["scalar_offset", "exactly one element"]);
            Ok((entry.to_f32_vec(), row.to_f32_vec()))
        })
        .unwrap();
    assert_eq!(got.0, vec![14.0]);
    assert_eq!(got.1, vec![6.0, 7.0, 8.0]);
}
