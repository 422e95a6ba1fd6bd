//! Tensor views: NumPy-style indexing (HBM vs on-chip rank rules), slices with
//! steps, reshape, `.ap()` access patterns with static and dynamic offsets, and
//! broadcast / expand_dim / select / slice.

use crate::common::*;
use nki_core::isa::{self as nisa, EngineOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Idx, Launch, Tensor, s};

/// An HBM tensor holding `0, 1, 2, ...` in row-major order.
fn iota_hbm(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    hbm(shape, &arange(n), Dtype::F32)
}

/// An SBUF tile holding `0, 1, 2, ...` in row-major order.
fn iota_sbuf(ctx: &Ctx, shape: &[i64]) -> Tensor {
    let n = shape.iter().product::<i64>() as usize;
    sbuf_with(ctx, shape, Dtype::F32, &arange(n)).unwrap()
}

/// Row-major flat index of `idx` in `shape`.
fn flat(shape: &[usize], idx: &[usize]) -> f32 {
    let mut f = 0;
    for (&n, &i) in shape.iter().zip(idx) {
        f = f * n + i;
    }
    f as f32
}

fn on_chip(f: impl Fn(&Ctx) + Sync) {
    Launch::new()
        .run(|ctx| {
            f(ctx);
            Ok(())
        })
        .unwrap();
}

#[test]
fn hbm_integer_index_drops_the_dim() {
    let sh = [4, 3, 5];
    let t = iota_hbm(&sh);
    let a = t.index(&s![1]).unwrap();
    assert_eq!(a.shape(), &[3, 5]);
    let want: Vec<f32> = (15..30).map(|v| v as f32).collect();
    assert_eq!(a.to_f32_vec(), want);

    let b = t.index(&s![.., 2]).unwrap();
    assert_eq!(b.shape(), &[4, 5]);
    let want: Vec<f32> = (0..4).flat_map(|i| (0..5).map(move |k| flat(&sh, &[i, 2, k]))).collect();
    assert_eq!(b.to_f32_vec(), want);

    let c = t.index(&s![-1, 1..3, -2]).unwrap();
    assert_eq!(c.shape(), &[2]);
    assert_eq!(c.to_f32_vec(), vec![flat(&sh, &[3, 1, 3]), flat(&sh, &[3, 2, 3])]);
    assert_eq!(c.buffer(), Buffer::SharedHbm);
    assert!(c.same_storage(&t));
}

#[test]
fn on_chip_integer_index_keeps_a_unit_partition_dim() {
    on_chip(|ctx| {
        let sh = [8usize, 4, 6];
        let t = iota_sbuf(ctx, &[8, 4, 6]);
        let a = t.index(&s![2]).unwrap();
        assert_eq!(a.shape(), &[1, 4, 6]);
        let want: Vec<f32> = (48..72).map(|v| v as f32).collect();
        assert_eq!(a.to_f32_vec(), want);

        // An integer on a free dim drops it ...
        let b = t.index(&s![.., 1]).unwrap();
        assert_eq!(b.shape(), &[8, 6]);
        let want: Vec<f32> = (0..8).flat_map(|p| (0..6).map(move |k| flat(&sh, &[p, 1, k]))).collect();
        assert_eq!(b.to_f32_vec(), want);

        // ... unless that would leave fewer than two dims: a (P, 1) column stays.
        let c = t.index(&s![.., 1, 2]).unwrap();
        assert_eq!(c.shape(), &[8, 1]);
        let want: Vec<f32> = (0..8).map(|p| flat(&sh, &[p, 1, 2])).collect();
        assert_eq!(c.to_f32_vec(), want);

        let d = t.index(&s![3, 1, 2]).unwrap();
        assert_eq!(d.shape(), &[1, 1]);
        assert_eq!(d.to_f32_vec(), vec![flat(&sh, &[3, 1, 2])]);

        let m = iota_sbuf(ctx, &[8, 5]);
        let col = m.index(&s![0..4, 3]).unwrap();
        assert_eq!(col.shape(), &[4, 1]);
        assert_eq!(col.to_f32_vec(), vec![3., 8., 13., 18.]);
    });
}

#[test]
fn on_chip_column_from_integer_index_works_as_a_scale_operand() {
    // `t[:n, g]` is the idiom kernels use for the (P, 1) operands of tensor_scalar.
    Launch::new()
        .run(|ctx| {
            let cols = iota_sbuf(ctx, &[4, 3]);
            let data = sbuf_with(ctx, &[4, 2], Dtype::F32, &[1., 2., 3., 4., 5., 6., 7., 8.])?;
            let out = alloc(ctx, &[4, 2], Dtype::F32, Buffer::Sbuf)?;
            let col = cols.index(&s![.., 2])?;
            assert_eq!(col.shape(), &[4, 1]);
            nisa::tensor_scalar(ctx, &out, &data, nki_core::nl::multiply, (&col).into(), Default::default())?;
            // column 2 of iota(4, 3) is 2, 5, 8, 11
            assert_eq!(out.to_f32_vec(), vec![2., 4., 15., 20., 40., 48., 77., 88.]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn slices_with_steps_negative_bounds_and_ds() {
    let sh = [6, 7];
    let t = iota_hbm(&sh);
    let v = t.index(&s![1..6;2, 0..7;3]).unwrap();
    assert_eq!(v.shape(), &[3, 3]);
    let want: Vec<f32> = [1, 3, 5].iter().flat_map(|&i| [0, 3, 6].map(|k| flat(&sh, &[i, k]))).collect();
    assert_eq!(v.to_f32_vec(), want);

    // A step on a full range, open ends, negative bounds and inclusive ranges.
    let w = t.index(&s![..;4, -3..]).unwrap();
    assert_eq!(w.shape(), &[2, 3]);
    let want: Vec<f32> = [0, 4].iter().flat_map(|&i| [4, 5, 6].map(|k| flat(&sh, &[i, k]))).collect();
    assert_eq!(w.to_f32_vec(), want);
    let x = t.index(&s![2..=3, ..=1]).unwrap();
    assert_eq!(x.to_f32_vec(), vec![14., 15., 21., 22.]);

    // A step that does not divide the extent rounds the count up.
    let y = t.index(&s![.., 1..6;2]).unwrap();
    assert_eq!(y.shape(), &[6, 3]);
    assert_eq!(y.index(&s![5]).unwrap().to_f32_vec(), vec![36., 38., 40.]);

    // nl.ds(start, size) is start..start+size; slices of slices compose.
    let z = t.index(&[nki_core::nl::ds(2, 3), Idx::Full]).unwrap().index(&s![1..3, 2..7;2]).unwrap();
    let want: Vec<f32> = [3, 4].iter().flat_map(|&i| [2, 4, 6].map(|k| flat(&sh, &[i, k]))).collect();
    assert_eq!(z.to_f32_vec(), want);

    // An empty slice is allowed and holds nothing.
    assert_eq!(t.index(&s![3..3]).unwrap().numel(), 0);
}

#[test]
fn out_of_range_indices_are_bounds_errors() {
    let t = iota_hbm(&[4, 5]);
    let e = expect_err(t.index(&s![4]));
    assert_err(&e, ErrorKind::Bounds, &["index 4", "dim 0"]);
    let e = expect_err(t.index(&s![.., -6]));
    assert_err(&e, ErrorKind::Bounds, &["index -6", "dim 1"]);
    let e = expect_err(t.index(&s![0..5]));
    assert_err(&e, ErrorKind::Bounds, &["0:5:1", "extent 4"]);
    let e = expect_err(t.index(&[Idx::Full, Idx::range(3, 2, 1)]));
    assert_err(&e, ErrorKind::Bounds, &["3:2:1"]);
    let e = expect_err(t.index(&s![.., 0..4;0]));
    assert_err(&e, ErrorKind::Bounds, &["0:4:0"]);
    let e = expect_err(t.index(&s![0, 0, 0]));
    assert_err(&e, ErrorKind::Bounds, &["3 indices", "2-d"]);
    let e = expect_err(t.slice(1, 2, 6, 1));
    assert_err(&e, ErrorKind::Bounds, &["2:6:1", "extent 5"]);
}

#[test]
fn hbm_reshape_needs_contiguity_and_the_same_element_count() {
    let t = iota_hbm(&[4, 6]);
    let r = t.reshape(&[2, 3, 4]).unwrap();
    assert_eq!(r.shape(), &[2, 3, 4]);
    assert_eq!(r.index(&s![1, 2]).unwrap().to_f32_vec(), vec![20., 21., 22., 23.]);
    // A contiguous view that starts mid-tensor keeps its start.
    let row = t.index(&s![2..4]).unwrap().reshape(&[3, 4]).unwrap();
    assert_eq!(row.index(&s![0]).unwrap().to_f32_vec(), vec![12., 13., 14., 15.]);
    let e = expect_err(t.reshape(&[5, 5]));
    assert_err(&e, ErrorKind::Shape, &["24 elements", "25 elements"]);
    let e = expect_err(t.index(&s![.., 0..3]).unwrap().reshape(&[12]));
    assert_err(&e, ErrorKind::Shape, &["not contiguous"]);
    // A broadcast view is not contiguous either.
    let b = iota_hbm(&[3, 1]).broadcast(1, 2).unwrap();
    assert!(b.reshape(&[6]).is_err());
}

#[test]
fn on_chip_reshape_keeps_the_partition_dim() {
    on_chip(|ctx| {
        let t = iota_sbuf(ctx, &[4, 6]);
        let r = t.reshape(&[4, 2, 3]).unwrap();
        assert_eq!(r.index(&s![2, 1]).unwrap().to_f32_vec(), vec![15., 16., 17.]);
        let e = expect_err(t.reshape(&[8, 3]));
        assert_err(&e, ErrorKind::Shape, &["partition dim 4"]);
        // Contiguous free dims of a partition slice reshape fine; the partition
        // stride is the allocation's.
        let v = t.index(&s![1..3, 2..6]).unwrap().reshape(&[2, 2, 2]).unwrap();
        assert_eq!(v.to_f32_vec(), vec![8., 9., 10., 11., 14., 15., 16., 17.]);
        // Strided free dims do not.
        let e = expect_err(t.index(&s![.., 0..6;2]).unwrap().reshape(&[4, 3, 1]));
        assert_err(&e, ErrorKind::Shape, &["not contiguous"]);
    });
}

#[test]
fn ap_offsets_count_from_the_views_start_and_patterns_are_row_major_steps() {
    let t = iota_hbm(&[4, 6]);
    // Transposed read.
    let tr = t.ap(&[[1, 6], [6, 4]], Some(0), None, 0).unwrap();
    assert_eq!(tr.shape(), &[6, 4]);
    let want: Vec<f32> = (0..6).flat_map(|c| (0..4).map(move |r| (r * 6 + c) as f32)).collect();
    assert_eq!(tr.to_f32_vec(), want);
    // Explicit absolute offset.
    let blk = t.ap(&[[6, 2], [1, 3]], Some(7), None, 0).unwrap();
    assert_eq!(blk.to_f32_vec(), vec![7., 8., 9., 13., 14., 15.]);
    // `offset=None` keeps the view's own start.
    let v = t.index(&s![1..]).unwrap();
    let k = v.ap(&[[2, 3]], None, None, 0).unwrap();
    assert_eq!(k.to_f32_vec(), vec![6., 8., 10.]);
    // On a view that does not start at 0, an explicit offset counts from its start.
    assert_eq!(v.ap(&[[1, 2]], Some(0), None, 0).unwrap().to_f32_vec(), vec![6., 7.]);
    assert_eq!(v.ap(&[[1, 2]], Some(5), None, 0).unwrap().to_f32_vec(), vec![11., 12.]);
    // A skewed (diagonal) read and a zero step.
    let d = t.ap(&[[7, 4]], Some(0), None, 0).unwrap();
    assert_eq!(d.to_f32_vec(), vec![0., 7., 14., 21.]);
    let z = t.ap(&[[0, 3], [1, 2]], Some(4), None, 0).unwrap();
    assert_eq!(z.to_f32_vec(), vec![4., 5., 4., 5., 4., 5.]);
}

#[test]
fn ap_dynamic_offset_uses_the_row_major_stride_of_indirect_dim() {
    let sh = [3usize, 4, 5];
    let t = iota_hbm(&sh);
    for (dim, stride) in [(0usize, 20i64), (1, 5), (2, 1)] {
        for v in 0..3i64 {
            let a = t.ap(&[[1, 2]], Some(1), Some(v), dim).unwrap();
            let start = 1 + v * stride;
            assert_eq!(a.to_f32_vec(), vec![start as f32, (start + 1) as f32], "indirect_dim {dim} value {v}");
        }
    }
    // Without an explicit offset the view's offset is the base.
    let a = t.ap(&[[1, 3]], None, Some(2), 1).unwrap();
    assert_eq!(a.to_f32_vec(), vec![10., 11., 12.]);
    // The stride comes from the shape of the tensor `.ap` is called on.
    let r = t.reshape(&[12, 5]).unwrap();
    let a = r.ap(&[[1, 2]], Some(0), Some(7), 0).unwrap();
    assert_eq!(a.to_f32_vec(), vec![35., 36.]);
    let r = t.reshape(&[6, 10]).unwrap();
    let a = r.ap(&[[1, 2]], Some(0), Some(5), 0).unwrap();
    assert_eq!(a.to_f32_vec(), vec![50., 51.]);
}

#[test]
fn ap_bounds_and_argument_errors() {
    let t = iota_hbm(&[4, 6]);
    let e = expect_err(t.ap(&[[1, 30]], Some(0), None, 0));
    assert_err(&e, ErrorKind::Bounds, &["0..=29", "24 cells"]);
    let e = expect_err(t.ap(&[[1, 4]], Some(21), None, 0));
    assert_err(&e, ErrorKind::Bounds, &["21..=24"]);
    let e = expect_err(t.ap(&[[1, 2]], Some(-1), None, 0));
    assert_err(&e, ErrorKind::Bounds, &["-1..=0"]);
    // A dynamic offset that pushes rows outside the tensor still makes a view: the
    // instruction using it refuses those rows or skips them under oob_mode=skip
    // (`isa::dma_indirect::scalar_offset_rows_outside_are_an_error_or_skipped`).
    assert!(t.ap(&[[1, 6]], Some(0), Some(4), 0).is_ok());
    let e = expect_err(t.ap(&[[1, 2]], Some(0), Some(1), 2));
    assert_err(&e, ErrorKind::Shape, &["indirect_dim 2"]);
    let e = expect_err(t.ap(&[], Some(0), None, 0));
    assert_eq!(e.kind, ErrorKind::Shape);
    let e = expect_err(t.ap(&[[1, 0]], Some(0), None, 0));
    assert_eq!(e.kind, ErrorKind::Shape);
}

#[test]
fn on_chip_ap_partition_step_and_broadcast_column() {
    Launch::new()
        .run(|ctx| {
            let t = iota_sbuf(ctx, &[4, 8]);
            // Partitions 1..3, columns 4..7: the partition step is the 8 free elements.
            let blk = t.ap(&[[8, 2], [1, 4]], Some(8 + 4), None, 0)?;
            assert_eq!(blk.to_f32_vec(), vec![12., 13., 14., 15., 20., 21., 22., 23.]);
            // Column 2 broadcast three times, fed to a compute op.
            let bc = t.ap(&[[8, 4], [0, 3]], Some(2), None, 0)?;
            let out = alloc(ctx, &[4, 3], Dtype::F32, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &out, &bc, EngineOpts::default())?;
            let want: Vec<f32> = (0..4).flat_map(|p| [(p * 8 + 2) as f32; 3]).collect();
            assert_eq!(out.to_f32_vec(), want);
            // A dynamic offset on dim 0 of an on-chip tile moves whole partitions.
            let row = t.ap(&[[8, 1], [1, 3]], Some(1), Some(3), 0)?;
            assert_eq!(row.to_f32_vec(), vec![25., 26., 27.]);
            // A pattern whose free part crosses into the next partition is not a tile.
            let bad = t.ap(&[[8, 2], [1, 6]], Some(4), None, 0)?;
            let e = expect_err(nisa::tensor_copy(ctx, &out, &bad, EngineOpts::default()));
            assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_copy", "partition-major"]);
            // The docs' counter-example: a partition step other than the free
            // size (every other partition) is refused where the view is made.
            let wide = alloc(ctx, &[16, 32], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(wide.ap(&[[64, 8], [1, 32]], Some(0), None, 0));
            assert_err(&e, ErrorKind::Shape, &["[[64, 8], [1, 32]]", "free size 32"]);
            assert!(wide.ap(&[[32, 16], [1, 32]], Some(0), None, 0).is_ok());
            Ok(())
        })
        .unwrap();
}

#[test]
fn broadcast_expand_dim_select_and_slice() {
    let t = iota_hbm(&[3, 1]);
    let b = t.broadcast(1, 4).unwrap();
    assert_eq!(b.shape(), &[3, 4]);
    assert_eq!(b.to_f32_vec(), vec![0., 0., 0., 0., 1., 1., 1., 1., 2., 2., 2., 2.]);
    let e = expect_err(t.broadcast(0, 2));
    assert_err(&e, ErrorKind::Shape, &["extent 3", "unit dim"]);
    let e = expect_err(t.broadcast(2, 2));
    assert_err(&e, ErrorKind::Shape, &["dim 2 does not exist"]);
    // HBM: a unit dim 0 may be broadcast and a dim may be inserted at 0.
    let row = iota_hbm(&[1, 3]);
    assert_eq!(row.broadcast(0, 2).unwrap().to_f32_vec(), vec![0., 1., 2., 0., 1., 2.]);
    let x = row.expand_dim(0).unwrap();
    assert_eq!(x.shape(), &[1, 1, 3]);
    assert!(row.expand_dim(3).is_err());

    let m = iota_hbm(&[3, 4]);
    assert_eq!(m.select(1, 2).unwrap().to_f32_vec(), vec![2., 6., 10.]);
    assert_eq!(m.select(0, -1).unwrap().to_f32_vec(), vec![8., 9., 10., 11.]);
    assert!(m.select(1, 4).is_err());
    assert!(m.select(2, 0).is_err());
    let sl = m.slice(1, 1, 4, 2).unwrap();
    assert_eq!(sl.to_f32_vec(), vec![1., 3., 5., 7., 9., 11.]);
    assert!(m.slice(3, 0, 1, 1).is_err());
}

#[test]
fn on_chip_views_never_touch_the_partition_dim() {
    on_chip(|ctx| {
        let t = iota_sbuf(ctx, &[4, 3]);
        let e = expect_err(t.broadcast(0, 2));
        assert_err(&e, ErrorKind::Shape, &["partition dim"]);
        let e = expect_err(t.expand_dim(0));
        assert_eq!(e.kind, ErrorKind::Shape);
        let e = expect_err(t.select(0, 1));
        assert_err(&e, ErrorKind::Shape, &["partition dim"]);
        // The same corr-column idiom kernels use: (P, G) -> (P, 2, 1) -> (P, 2, 5).
        let v = t.slice(1, 1, 3, 1).unwrap().expand_dim(2).unwrap().broadcast(2, 5).unwrap();
        assert_eq!(v.shape(), &[4, 2, 5]);
        let want: Vec<f32> = (0..4).flat_map(|p| [1, 2].into_iter().flat_map(move |c| [(p * 3 + c) as f32; 5])).collect();
        assert_eq!(v.to_f32_vec(), want);
        // select on a free dim of a 3-d tile removes it.
        let u = iota_sbuf(ctx, &[2, 3, 4]);
        let w = u.select(1, 2).unwrap();
        assert_eq!(w.shape(), &[2, 4]);
        assert_eq!(w.to_f32_vec(), vec![8., 9., 10., 11., 20., 21., 22., 23.]);
    });
}

#[test]
fn writes_through_one_view_are_seen_by_the_others() {
    let t = Tensor::zeros(&[3, 4], Dtype::F32).unwrap();
    let col = t.index(&s![.., 1..4;2]).unwrap();
    col.fill_from_f32(&[1., 2., 3., 4., 5., 6.]).unwrap();
    assert_eq!(t.to_f32_vec(), vec![0., 1., 0., 2., 0., 3., 0., 4., 0., 5., 0., 6.]);
    let tr = t.ap(&[[1, 4], [4, 3]], Some(0), None, 0).unwrap();
    assert_eq!(tr.to_f32_vec(), vec![0., 0., 0., 1., 3., 5., 0., 0., 0., 2., 4., 6.]);
    let e = expect_err(col.fill_from_f32(&[1.0]));
    assert_eq!(e.kind, ErrorKind::Argument);
}
