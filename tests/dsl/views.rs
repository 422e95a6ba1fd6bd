//! Reordering views in a kernel: `permute`, `squeeze_dim` and `flatten_dims`
//! compile to the emulator's views and address the documented elements.

use crate::common;

use crate::common::{as_dtype, assert_close, tensor, uniform};
use nki::prelude::*;

/// Copies `x` `[128, A, B]` into an SBUF tile permuted to `[128, B, A]`, then
/// writes it out flattened as `[128, B * A]`; `y` `[128, 1, M]` is squeezed.
#[nki_kernel]
pub fn reorder(x: Hbm, y: Hbm) -> (Hbm, Hbm) {
    let [p, a, b] = x.shape();
    let t = nl::ndarray([p, b, a], nl::float32);
    nisa::dma_copy(t, x.permute([0, 2, 1]));
    let out = nl::ndarray([p, b * a], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, t.flatten_dims(1, 2));
    let [q, _, m] = y.shape();
    let out2 = nl::ndarray([q, m], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out2, y.squeeze_dim(1));
    (out, out2)
}

#[test]
fn permuted_flattened_and_squeezed_views_move_the_right_elements() {
    let (p, a, b, m) = (128usize, 3usize, 5usize, 7usize);
    let x = as_dtype(&uniform(p * a * b, 1, -1.0, 1.0), Dtype::F32);
    let y = as_dtype(&uniform(p * m, 2, -1.0, 1.0), Dtype::F32);
    let (o1, o2) =
        reorder::Call::new(&tensor(&[p, a, b], &x, Dtype::F32), &tensor(&[p, 1, m], &y, Dtype::F32)).launch(&Launch::new()).unwrap();
    let want: Vec<f64> =
        (0..p).flat_map(|r| (0..b).flat_map(move |j| (0..a).map(move |i| (r, i, j)))).map(|(r, i, j)| x[r * a * b + i * b + j]).collect();
    assert_close("permute + flatten", &o1.to_f32_vec(), &want, 0.0, 0.0);
    assert_close("squeeze", &o2.to_f32_vec(), &y, 0.0, 0.0);
    assert!(reorder::NKI_SOURCE.contains("x.permute(dims=(0, 2, 1))"), "{}", reorder::NKI_SOURCE);
}

/// Writes 1 or 0 per view into `flags` `[1, 6]`: whether each view is contiguous
/// (six views of an SBUF tile and an HBM tensor), the last column whether `x` is
/// indirect.
#[nki_kernel]
pub fn contiguity(x: Hbm) -> Hbm {
    let [p, f] = x.shape();
    let t = nl::ndarray([p, f], nl::float32);
    let flags = nl::ndarray([1, 6], nl::float32);
    nisa::memset(flags[s![.., 0..1]], if x.is_contiguous() { 1.0 } else { 0.0 });
    nisa::memset(flags[s![.., 1..2]], if x[s![.., 0..2]].is_contiguous() { 1.0 } else { 0.0 });
    nisa::memset(flags[s![.., 2..3]], if t[s![.., 0..2]].is_contiguous() { 1.0 } else { 0.0 });
    nisa::memset(flags[s![.., 3..4]], if t[s![0..1, ..]].is_contiguous() { 1.0 } else { 0.0 });
    nisa::memset(flags[s![.., 4..5]], if x.permute([1, 0]).is_contiguous() { 1.0 } else { 0.0 });
    nisa::memset(flags[s![.., 5..6]], if x.is_indirect() { 1.0 } else { 0.0 });
    let out = nl::ndarray([1, 6], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, flags);
    out
}

#[test]
fn contiguity_and_indirection_flags_agree_with_the_numpy_executor() {
    let x = tensor(&[4, 5], &[0.0; 20], Dtype::F32);
    // Whole HBM tensor; HBM column slice; SBUF column slice (free dims only); one
    // SBUF partition; transposed HBM view; a direct view is not indirect.
    let want = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    let out = contiguity::Call::new(&x).launch(&Launch::new()).unwrap();
    assert_close("emulated flags", &out.to_f32_vec(), &want, 0.0, 0.0);
    let pkg = common::package_of("contiguity_pkg", &[&contiguity::INFO]);
    let args = vec![vec![common::Arg::Tensor(vec![4, 5], vec![0.0; 20], Dtype::F32)]];
    assert_close("numpy flags", &common::run_numpy_ranks(&pkg, "contiguity", &args, 1, "fp32").swap_remove(0)[0], &want, 0.0, 0.0);
}

/// Every 8th row and 4th column of `x` `[128, 32]`, the rows stepped with the
/// loop's spelling `(0..128).step_by(8)` and the columns with `0..32;4`.
#[nki_kernel]
pub fn stepped_view(x: Hbm) -> Hbm {
    let t = nl::ndarray([16, 8], nl::float32);
    nisa::dma_copy(t, x[s![(0..128).step_by(8), 0..32;4]]);
    let out = nl::ndarray([16, 8], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, t);
    out
}

#[test]
fn step_by_inside_s_is_a_stepped_slice() {
    let xs = uniform(128 * 32, 7, -1.0, 1.0);
    let want: Vec<f64> = (0..16).flat_map(|i| (0..8).map(move |j| (i * 8, j * 4))).map(|(r, c)| xs[r * 32 + c] as f32 as f64).collect();
    let x = tensor(&[128, 32], &xs, Dtype::F32);
    let got = stepped_view::Call::new(&x).launch(&Launch::new()).unwrap();
    assert_close("emulated", &got.to_f32_vec(), &want, 0.0, 0.0);
    let pkg = common::package_of("stepped_view_pkg", &[&stepped_view::INFO]);
    let args = vec![vec![common::Arg::Tensor(vec![128, 32], xs, Dtype::F32)]];
    assert_close("numpy", &common::run_numpy_ranks(&pkg, "stepped_view", &args, 1, "fp32").swap_remove(0)[0], &want, 0.0, 0.0);
    assert!(stepped_view::NKI_SOURCE.contains("x[0:128:8, 0:32:4]"), "{}", stepped_view::NKI_SOURCE);
}
