//! `.ap(vector_offset=)` views moved by `nisa.dma_copy`: rows gathered from and
//! scattered to offsets held in an SBUF tensor, checked against index arithmetic
//! written from the documented meaning (row r of the view starts at
//! `offsets[r] * stride(indirect_dim)`, offsets in column-major order).

use crate::common::*;
use nki_core::isa::{self as nisa, DmaCopyOpts, OobMode};
use nki_core::{Buffer, Dtype, ErrorKind, Precision, Tensor};

/// A `[10, 4]` HBM table whose entry (i, j) is `i + j / 8 + 1/3` (not exact in bf16).
fn table() -> (Vec<f64>, Tensor) {
    let v: Vec<f64> = (0..40).map(|k| (k / 4) as f64 + (k % 4) as f64 / 8.0 + 1.0 / 3.0).collect();
    let t = hbm(&[10, 4], &v, Dtype::F32);
    (v.iter().map(|&x| x as f32 as f64).collect(), t)
}

#[test]
fn gathers_rows_at_column_major_offsets_in_both_precisions() {
    let (values, table) = table();
    // A (2, 3) offset tile read column by column: 7, 0, 1, 4, 9, 2.
    let order = [7usize, 0, 1, 4, 9, 2];
    for precision in [Precision::Fp32, Precision::Hardware] {
        let got = launch(precision)
            .run(|ctx| {
                let idx = sbuf_with(ctx, &[2, 3], Dtype::I32, &[7.0, 1.0, 9.0, 0.0, 4.0, 2.0])?;
                let dst = alloc(ctx, &[6, 4], Dtype::Bf16, Buffer::Sbuf)?;
                let src = table.ap_vector_offset(&[[4, 6], [1, 4]], None, &idx, 0)?;
                assert!(src.is_indirect());
                nisa::dma_copy(ctx, &dst, &src, Default::default())?;
                Ok(dst.to_f32_vec())
            })
            .unwrap();
        let want: Vec<f64> = order.iter().flat_map(|&r| values[r * 4..r * 4 + 4].to_vec()).collect();
        // The DMA casts to bf16: rounded once in hardware mode, float32 kept in fp32 mode.
        let want: Vec<f64> = if precision == Precision::Hardware { want.iter().map(|&x| bf16(x as f32) as f64).collect() } else { want };
        assert_eq!(got.iter().map(|&x| x as f64).collect::<Vec<_>>(), want, "{precision:?}");
    }
}

#[test]
fn scatters_rows_into_an_indirect_destination() {
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let out = Tensor::from_f32(&[8, 3], &[-1.0; 24], Dtype::F32)?;
            let idx = sbuf_with(ctx, &[4, 1], Dtype::U32, &[5.0, 0.0, 7.0, 2.0])?;
            let src = sbuf_with(ctx, &[4, 3], Dtype::F32, &arange(12))?;
            nisa::dma_copy(ctx, &out.ap_vector_offset(&[[3, 4], [1, 3]], None, &idx, 0)?, &src, Default::default())?;
            Ok(out.to_f32_vec())
        })
        .unwrap();
    let mut want = vec![-1.0f32; 24];
    for (r, &row) in [5usize, 0, 7, 2].iter().enumerate() {
        for j in 0..3 {
            want[row * 3 + j] = (r * 3 + j) as f32;
        }
    }
    assert_eq!(got, want);
}

#[test]
fn offsets_count_in_the_views_own_stride() {
    // Columns 1..3 of a [5, 4] table: the view starts at cell 1 and its dim 0 steps
    // by 4 cells, so offset k moves k whole table rows (not k rows of 2).
    let t = hbm(&[5, 4], &arange(20), Dtype::F32);
    let view = t.index(&nki_core::s![.., 1..3]).unwrap();
    let scalar = view.ap(&[[1, 2]], None, Some(3), 0).unwrap();
    assert_eq!(scalar.to_f32_vec(), vec![13.0, 14.0]);
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let idx = sbuf_with(ctx, &[2, 1], Dtype::I32, &[4.0, 2.0])?;
            let dst = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &dst, &view.ap_vector_offset(&[[1, 2], [1, 2]], None, &idx, 0)?, Default::default())?;
            Ok(dst.to_f32_vec())
        })
        .unwrap();
    // Row r starts at cell 1 + idx[r] * 4 (the pattern's own step on dim 0 is not added).
    assert_eq!(got, vec![17.0, 18.0, 9.0, 10.0]);
}

#[test]
fn offsets_are_read_when_the_dma_runs() {
    let (values, table) = table();
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let idx = sbuf_with(ctx, &[2, 1], Dtype::I32, &[0.0, 0.0])?;
            let src = table.ap_vector_offset(&[[4, 2], [1, 4]], None, &idx, 0)?;
            nisa::dma_copy(ctx, &idx, &Tensor::from_i64(&[2, 1], &[8, 3], Dtype::I32)?, Default::default())?;
            let dst = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &dst, &src, Default::default())?;
            Ok(dst.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f32> = [8usize, 3].iter().flat_map(|&r| values[r * 4..r * 4 + 4].iter().map(|&x| x as f32)).collect();
    assert_eq!(got, want);
}

#[test]
fn an_out_of_bound_row_is_an_error_or_skipped() {
    let (values, table) = table();
    let run = |oob: Option<OobMode>| {
        launch(Precision::Fp32).run(|ctx| {
            let idx = sbuf_with(ctx, &[3, 1], Dtype::I32, &[2.0, 10.0, -1.0])?;
            let dst = sbuf_with(ctx, &[3, 4], Dtype::F32, &[-5.0; 12])?;
            let opts = DmaCopyOpts { oob_mode: oob, ..Default::default() };
            nisa::dma_copy(ctx, &dst, &table.ap_vector_offset(&[[4, 3], [1, 4]], None, &idx, 0)?, opts)?;
            Ok(dst.to_f32_vec())
        })
    };
    let e = expect_err(run(None));
    assert_err(&e, ErrorKind::Bounds, &["nisa.dma_copy", "vector_offset 10", "row 1", "oob_mode=skip"]);
    let got = run(Some(OobMode::Skip)).unwrap();
    let mut want: Vec<f32> = values[8..12].iter().map(|&x| x as f32).collect();
    want.extend([-5.0; 8]);
    assert_eq!(got, want);
}

/// A `scalar_offset` start that moves rows past the storage: the DMA refuses
/// it, or under `oob_mode=skip` writes the rows inside and leaves the rest (the
/// library's `indexed_flatten` parks rows at -1000000 that way).
#[test]
fn scalar_offset_rows_outside_are_an_error_or_skipped() {
    let (values, table) = table();
    let run = |start: i64, oob: Option<OobMode>| {
        launch(Precision::Fp32).run(|ctx| {
            let dst = sbuf_with(ctx, &[3, 4], Dtype::F32, &[-5.0; 12])?;
            let opts = DmaCopyOpts { oob_mode: oob, ..Default::default() };
            nisa::dma_copy(ctx, &dst, &table.ap(&[[4, 3], [1, 4]], None, Some(start), 0)?, opts)?;
            Ok(dst.to_f32_vec())
        })
    };
    let e = expect_err(run(9, None));
    assert_err(&e, ErrorKind::Bounds, &["nisa.dma_copy", "scalar_offset 9", "row 1", "oob_mode=skip"]);
    // Rows 9 and 10 of the 10-row table: the first is copied, the second skipped.
    let got = run(9, Some(OobMode::Skip)).unwrap();
    let mut want: Vec<f32> = values[36..40].iter().map(|&x| x as f32).collect();
    want.extend([-5.0; 8]);
    assert_eq!(got, want);
    assert_eq!(run(-1_000_000, Some(OobMode::Skip)).unwrap(), vec![-5.0; 12]);
}

/// An `oob_mode=skip` DMA moves only the rows it transfers: the destination
/// rows paired with skipped source rows stay unwritten (a later read of them is
/// reported), and the source rows paired with skipped destination rows are not
/// read (nothing is reported for them).
#[test]
fn skipped_rows_are_neither_written_nor_read() {
    let (_, table) = table();
    let report = launch(Precision::Fp32)
        // Warns rather than fails whatever NKI_STRICT_UNINIT the tests run under.
        .strict_uninit(false)
        .run_all(|ctx| {
            // Rows 2 and 10 (outside the 10-row table, skipped) gathered into a fresh tile.
            let idx = sbuf_with(ctx, &[2, 1], Dtype::I32, &[2.0, 10.0])?;
            let gathered = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
            let skip = DmaCopyOpts { oob_mode: Some(OobMode::Skip), ..Default::default() };
            nisa::dma_copy(ctx, &gathered, &table.ap_vector_offset(&[[4, 2], [1, 4]], None, &idx, 0)?, skip)?;
            let out = Tensor::from_f32(&[2, 4], &[-1.0; 8], Dtype::F32)?;
            nisa::dma_copy(ctx, &out, &gathered, Default::default())?;
            // Row 0 of a half-written tile scattered to row 2 of a 3-row table, row 1 to row 9 (skipped).
            let half = alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?;
            let sevens = Tensor::from_f32(&[1, 3], &[7.0; 3], Dtype::F32)?;
            nisa::dma_copy(ctx, &half.index(&nki_core::s![0..1, ..])?, &sevens, Default::default())?;
            let small = Tensor::from_f32(&[3, 3], &[0.0; 9], Dtype::F32)?;
            let rows = sbuf_with(ctx, &[2, 1], Dtype::I32, &[2.0, 9.0])?;
            nisa::dma_copy(ctx, &small.ap_vector_offset(&[[3, 2], [1, 3]], None, &rows, 0)?, &half, skip)?;
            Ok((out.to_f32_vec(), small.to_f32_vec()))
        })
        .unwrap();
    let (out, small) = &report.results[0][0];
    assert_eq!(out[4..], [0.0; 4], "the skipped row reads zero bits");
    assert_eq!(small[6..], [7.0; 3]);
    assert_eq!(report.undefined.len(), 1, "{:?}", report.undefined);
    assert!(report.undefined[0].contains("reads 4 elements of 'tensor' [2, 4] float32 in SBUF"), "{:?}", report.undefined);
    assert!(report.undefined[0].contains("(the first at [1, 0])"), "{:?}", report.undefined);
}

#[test]
fn the_offset_tensor_must_be_integer_sbuf_with_a_value_per_row() {
    let (_, table) = table();
    launch(Precision::Fp32)
        .run(|ctx| {
            for bad in [alloc(ctx, &[2, 1], Dtype::I32, Buffer::Sbuf)?, alloc(ctx, &[4, 1], Dtype::F32, Buffer::Sbuf)?] {
                let e = expect_err(table.ap_vector_offset(&[[4, 3], [1, 4]], None, &bad, 0));
                assert_err(&e, ErrorKind::Shape, &["ap", "vector_offset", "integer SBUF", "at least 3"]);
            }
            let ok = alloc(ctx, &[4, 1], Dtype::I32, Buffer::Sbuf)?;
            let e = expect_err(table.ap_vector_offset(&[[4, 3], [1, 4]], None, &ok, 2));
            assert_err(&e, ErrorKind::Shape, &["indirect_dim 2"]);
            Ok(())
        })
        .unwrap();
}
