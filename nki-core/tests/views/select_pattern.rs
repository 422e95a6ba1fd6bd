//! `NkiTensor.vector_select` (per-partition rows of an HBM tensor chosen by an
//! SBUF offset tile, resolved when a DMA runs) and `get_pattern` (a view as the
//! `[[step, count], ...]` that `.ap()` takes back).

use crate::common::*;
use nki_core::isa::{DmaCopyOpts, OobMode, dma_copy};
use nki_core::{Buffer, Dtype, ErrorKind, Launch, s};

#[test]
fn vector_select_gathers_the_selected_rows() {
    let (n, a, b) = (5usize, 2usize, 3usize);
    let table: Vec<f64> = (0..n * a * b).map(|i| i as f64).collect();
    let run = |offsets: [f64; 4], oob: Option<OobMode>| {
        Launch::new().run(|ctx| {
            let t = hbm(&[n, a, b], &table, Dtype::F32);
            let idx = sbuf_with(ctx, &[4, 1], Dtype::I32, &offsets)?;
            let v = t.vector_select(0, &idx)?;
            assert_eq!(v.shape(), &[4, a, b]);
            assert!(v.is_indirect());
            let dst = alloc(ctx, &[4, (a * b) as i64], Dtype::F32, Buffer::Sbuf)?;
            nki_core::isa::memset(ctx, &dst, -1.0, Default::default())?;
            dma_copy(ctx, &dst.reshape(&[4, a, b])?, &v, DmaCopyOpts { oob_mode: oob, ..Default::default() })?;
            Ok(dst.to_f32_vec())
        })
    };
    let got = run([3.0, 0.0, 3.0, 7.0], Some(OobMode::Skip)).unwrap();
    // Partition p holds row offsets[p] of the table (a * b elements); row 7 does not exist: skipped.
    let want: Vec<f64> = [3usize, 0, 3].iter().flat_map(|&r| (0..a * b).map(move |k| (r * a * b + k) as f64)).chain([-1.0; 6]).collect();
    assert_close(&got, &want, 0.0, 0.0);
    let e = expect_err(run([3.0, 0.0, 3.0, 7.0], None));
    assert_err(&e, ErrorKind::Bounds, &["nisa.dma_copy", "selects row 7", "5 rows"]);
    let e = expect_err(run([3.0, -1.0, 0.0, 0.0], None));
    assert_err(&e, ErrorKind::Bounds, &["selects row -1"]);
}

#[test]
fn vector_select_takes_dim_0_of_hbm_and_one_offset_per_partition() {
    let e = expect_err(Launch::new().run(|ctx| {
        let t = hbm(&[4, 3], &[0.0; 12], Dtype::F32);
        let idx = alloc(ctx, &[2, 1], Dtype::I32, Buffer::Sbuf)?;
        t.vector_select(1, &idx)
    }));
    assert_err(&e, ErrorKind::Shape, &["vector_select", "dim 0 of an HBM tensor"]);
    let e = expect_err(Launch::new().run(|ctx| {
        let t = hbm(&[4, 3], &[0.0; 12], Dtype::F32);
        let idx = alloc(ctx, &[2, 2], Dtype::I32, Buffer::Sbuf)?;
        t.vector_select(0, &idx)
    }));
    assert_err(&e, ErrorKind::Shape, &["one offset per partition"]);
    let e = expect_err(Launch::new().run(|ctx| {
        let t = alloc(ctx, &[4, 3], Dtype::F32, Buffer::Sbuf)?;
        let idx = alloc(ctx, &[2, 1], Dtype::I32, Buffer::Sbuf)?;
        t.vector_select(0, &idx)
    }));
    assert_err(&e, ErrorKind::Shape, &["HBM"]);
}

#[test]
fn get_pattern_round_trips_through_ap() {
    let t = hbm(&[4, 6], &(0..24).map(f64::from).collect::<Vec<_>>(), Dtype::F32);
    let odd = t.index(&s![1..4, 1..6;2]).unwrap();
    // Steps in cells of the row-major allocation; the view's start is not part of the pattern.
    assert_eq!(odd.get_pattern(), vec![[6, 3], [2, 3]]);
    let again = t.ap(&odd.get_pattern(), Some(7), None, 0).unwrap();
    assert_eq!(again.to_f32_vec(), odd.to_f32_vec());
    Launch::new()
        .run(|ctx| {
            // On chip the partition step is the allocation's elements per partition.
            let sb = alloc(ctx, &[4, 2, 3], Dtype::F32, Buffer::Sbuf)?;
            assert_eq!(sb.permute(&[0, 2, 1])?.get_pattern(), vec![[6, 4], [1, 3], [3, 2]]);
            Ok(())
        })
        .unwrap();
}
