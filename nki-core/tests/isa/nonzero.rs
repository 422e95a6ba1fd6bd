//! `nonzero_with_count` against the documented example and its per-core
//! behaviour: only partitions 0, 16, ..., 112 are read and written.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, NonzeroOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[test]
fn indices_padding_and_count_on_each_core_partition_only() {
    let (p, t) = (32usize, 8usize);
    // Row 0 is the docs' example; row 16 another pattern; every row has data.
    let mut x: Vec<f64> = (0..p * t).map(|i| f64::from(u8::from(i % 3 == 0))).collect();
    x[..t].copy_from_slice(&[0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    x[16 * t..17 * t].copy_from_slice(&[2.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]);
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let s = sbuf_with(ctx, &[p as i64, t as i64], Dtype::F32, &x)?;
            let d = sbuf_with(ctx, &[p as i64, t as i64 + 1], Dtype::I32, &vec![7.0; p * (t + 1)])?;
            nisa::nonzero_with_count(ctx, &d, &s, NonzeroOpts { index_offset: Some(16), ..Default::default() })?;
            Ok(d.to_i64_vec())
        })
        .unwrap();
    assert_eq!(&got[..t + 1], &[17, 18, 21, -1, -1, -1, -1, -1, 3]);
    assert_eq!(&got[16 * (t + 1)..17 * (t + 1)], &[16, 23, -1, -1, -1, -1, -1, -1, 2]);
    for r in (1..p).filter(|r| r % 16 != 0) {
        assert!(got[r * (t + 1)..(r + 1) * (t + 1)].iter().all(|&v| v == 7), "partition {r} was written");
    }
}

#[test]
fn needs_trn2_int32_dst_and_one_more_element() {
    let e = expect_err(launch(Precision::Fp32).generation(Generation::Trn1).run(|ctx| {
        let s = alloc(ctx, &[16, 8], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[16, 9], Dtype::I32, Buffer::Sbuf)?;
        nisa::nonzero_with_count(ctx, &d, &s, NonzeroOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["exists on trn2, trn3 only", "targets trn1"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let s = alloc(ctx, &[16, 8], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[16, 8], Dtype::I32, Buffer::Sbuf)?;
        nisa::nonzero_with_count(ctx, &d, &s, NonzeroOpts::default())
    }));
    assert_err(&e, ErrorKind::Shape, &["16 partitions x 9 elements"]);
}
