//! `NkiTensor.reshape_dim` and `rearrange` as views: the elements they address,
//! against index arithmetic on the row-major source (the einops meaning of the
//! patterns), composed with slices, permutes and flattens.

use crate::common::alloc;
use crate::helpers::arange;
use nki_core::{Buffer, Dtype, Launch, Tensor, s};

#[test]
fn reshape_dim_splits_one_dim_row_major() {
    let (a, b, c) = (3usize, 12usize, 2usize);
    let t = arange(&[a, b, c]);
    // [3, 12, 2] -> [3, 4, 3, 2]: element (i, j, k, l) is source (i, 3 j + k, l).
    let v = t.reshape_dim(1, &[4, -1]).unwrap();
    assert_eq!(v.shape(), &[a, 4, 3, c]);
    let want: Vec<f32> = (0..a)
        .flat_map(|i| (0..4).flat_map(move |j| (0..3).flat_map(move |k| (0..c).map(move |l| (i * b * c + (3 * j + k) * c + l) as f32))))
        .collect();
    assert_eq!(v.to_f32_vec(), want);
    // Splitting a strided view keeps its step: every other column of [2, 8], split in [2, 2].
    let w = arange(&[2, 8]).index(&s![.., 0..8;2]).unwrap().reshape_dim(1, &[2, 2]).unwrap();
    assert_eq!(w.to_f32_vec(), vec![0., 2., 4., 6., 8., 10., 12., 14.]);
    assert_eq!(w.index(&s![1, 1, 0]).unwrap().to_f32_vec(), vec![12.]);
}

#[test]
fn reshape_dim_refuses_sizes_that_do_not_split_the_dim() {
    let t = arange(&[4, 6]);
    for bad in [&[4, 2][..], &[-1, -1], &[0, 6], &[-1, 4], &[-3, 2]] {
        let e = t.reshape_dim(1, bad).unwrap_err().to_string();
        assert!(e.contains("reshape_dim") && e.contains("does not split dim 1"), "{bad:?}: {e}");
    }
    assert!(t.reshape_dim(2, &[1]).unwrap_err().to_string().contains("does not exist"));
    Launch::new()
        .run(|ctx| {
            let sb = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
            let e = sb.reshape_dim(0, &[2, 2]).unwrap_err().to_string();
            assert!(e.contains("partition dim"), "{e}");
            assert_eq!(sb.reshape_dim(1, &[3, 2])?.shape(), &[4, 3, 2]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn rearrange_splits_reorders_and_merges_by_name() {
    // The documented example: ('b', ('h', 'w')) -> ('b', 'w', 'h') with h = 4 on [8, 24].
    let (bn, h, w) = (8usize, 4usize, 6usize);
    let t = arange(&[bn, h * w]);
    let v = t.rearrange(&[&["b"], &["h", "w"]], &[&["b"], &["w"], &["h"]], &[("h", 4)]).unwrap();
    assert_eq!(v.shape(), &[bn, w, h]);
    let want: Vec<f32> = (0..bn).flat_map(|b| (0..w).flat_map(move |j| (0..h).map(move |i| (b * h * w + i * w + j) as f32))).collect();
    assert_eq!(v.to_f32_vec(), want);
    // A merge: ('p', 'a', 'b', 'c') -> ('p', 'c', ('a', 'b')) needs (a, b) adjacent in memory, which they are.
    let u = arange(&[2, 3, 4, 1]);
    let m = u.rearrange(&[&["p"], &["a"], &["b"], &["c"]], &[&["p"], &["c"], &["a", "b"]], &[]).unwrap();
    assert_eq!(m.shape(), &[2, 1, 12]);
    assert_eq!(m.to_f32_vec(), u.to_f32_vec());
}

#[test]
fn rearrange_refuses_patterns_that_do_not_fit() {
    let t = arange(&[4, 6]);
    let e = |r: nki_core::Result<Tensor>| r.unwrap_err().to_string();
    assert!(e(t.rearrange(&[&["a"]], &[&["a"]], &[])).contains("names 1 dims"));
    assert!(e(t.rearrange(&[&["a"], &["b"]], &[&["a"], &["c"]], &[])).contains("same dims"));
    assert!(e(t.rearrange(&[&["a"], &["a"]], &[&["a"], &["a"]], &[])).contains("each name once"));
    // Two unknown sizes in one group, and a merge of dims that the reorder made non-adjacent.
    assert!(e(t.rearrange(&[&["a"], &["b", "c"]], &[&["a"], &["b"], &["c"]], &[])).contains("does not split"));
    assert!(e(t.rearrange(&[&["a"], &["b", "c"]], &[&["a"], &["c", "b"]], &[("b", 2)])).contains("not contiguous"));
}
