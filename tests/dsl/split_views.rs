//! Splitting views in a kernel: `reshape_dim` and the einops-style `rearrange`,
//! composed with slices, `permute` and `flatten_dims`, address the documented
//! elements in the emulator and under the NumPy executor.

use crate::common;

use crate::common::{Arg, as_dtype, assert_close, tensor, uniform};
use nki::prelude::*;

/// `x` `[P, 24]`: `a` is `x` with its columns split `[4, 6]`, the two halves
/// swapped (`[P, 6, 4]`) and merged back; `b` is every other column of `x`
/// rearranged `(p, (h, w)) -> (p, w, h)` with `h = 3` (`[P, 4, 3]`, merged).
#[nki_kernel]
pub fn split_views(x: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let t = nl::ndarray([p, 6, 4], nl::float32);
    nisa::dma_copy(t, x.reshape_dim(1, [4, -1]).permute([0, 2, 1]));
    let a = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(a, t.flatten_dims(1, 2));
    let u = nl::ndarray([p, 4, 3], nl::float32);
    nisa::dma_copy(u, x[s![.., 0..f;2]].rearrange(("p", ("h", "w")), ("p", "w", "h"), fixed_sizes = [("h", 3)]));
    let b = nl::ndarray([p, 12], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(b, u.rearrange(("p", "w", "h"), ("p", ("w", "h"))));
    (a, b)
}

#[test]
fn reshape_dim_and_rearrange_address_the_einops_elements() {
    let (p, f) = (16usize, 24usize);
    let x = as_dtype(&uniform(p * f, 7, -1.0, 1.0), Dtype::F32);
    // a[r, 4 j + i] = x[r, 6 i + j]; b[r, 3 w + h] = x[r, 2 (4 h + w)].
    let want_a: Vec<f64> =
        (0..p).flat_map(|r| (0..6).flat_map(move |j| (0..4).map(move |i| (r, 6 * i + j)))).map(|(r, c)| x[r * f + c]).collect();
    let want_b: Vec<f64> =
        (0..p).flat_map(|r| (0..4).flat_map(move |w| (0..3).map(move |h| (r, 2 * (4 * h + w))))).map(|(r, c)| x[r * f + c]).collect();
    let (a, b) = split_views::Call::new(&tensor(&[p, f], &x, Dtype::F32)).launch(&Launch::new()).unwrap();
    assert_close("reshape_dim", &a.to_f32_vec(), &want_a, 0.0, 0.0);
    assert_close("rearrange", &b.to_f32_vec(), &want_b, 0.0, 0.0);
    let src = split_views::NKI_SOURCE;
    assert!(src.contains("x.reshape_dim(dim=1, shape=(4, -1))"), "{src}");
    assert!(src.contains(r#"rearrange(src_pattern=("p", ("h", "w")), dst_pattern=("p", "w", "h"), fixed_sizes={"h": 3})"#), "{src}");
    let pkg = common::package_of("split_views_pkg", &[&split_views::INFO]);
    let args = vec![vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::F32)]];
    let np = common::run_numpy_ranks(&pkg, "split_views", &args, 1, "fp32").swap_remove(0);
    assert_close("numpy reshape_dim", &np[0], &want_a, 0.0, 0.0);
    assert_close("numpy rearrange", &np[1], &want_b, 0.0, 0.0);
}

/// A split whose sizes only fit at run time: `n` columns split `[k, -1]`.
#[nki_kernel]
pub fn split_at_run_time(x: Hbm, k: i64) -> Hbm {
    let [p, f] = x.shape();
    let out = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out.reshape_dim(1, [k, -1]), x.reshape_dim(1, [k, -1]));
    out
}

#[test]
fn a_split_that_does_not_fit_is_an_error_naming_the_kernel_line() {
    let x = tensor(&[2, 6], &[0.0; 12], Dtype::F32);
    assert!(split_at_run_time::Call::new(&x, 3).launch(&Launch::new()).is_ok());
    let e = split_at_run_time::Call::new(&x, 4).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("reshape_dim") && e.contains("does not split dim 1") && e.contains("tests/dsl/split_views.rs"), "{e}");
}
