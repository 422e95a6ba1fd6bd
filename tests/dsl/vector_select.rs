//! `vector_select` and `get_pattern` in kernels: an embedding-style gather of
//! HBM rows chosen per partition by an SBUF offset tile, and views rebuilt from
//! their own access patterns, in the emulator and under the NumPy executor.

use crate::common;

use crate::common::{Arg, assert_close, tensor};
use nki::prelude::*;

/// Partition p of the result is row `idx[p]` of `table` `[N, A, B]` (flattened).
#[nki_kernel]
pub fn select_rows(table: Hbm, #[dtypes(int32)] idx: Hbm) -> Hbm {
    let [_, a, b] = table.shape();
    let [p, _] = idx.shape();
    let i = nl::ndarray([p, 1], nl::int32);
    nisa::dma_copy(i, idx);
    let rows = nl::ndarray([p, a, b], nl::float32);
    nisa::dma_copy(rows, table.vector_select(0, i));
    let out = nl::ndarray([p, a * b], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, rows.flatten_dims(1, 2));
    out
}

/// `odd` is `x`'s odd columns read through `x.ap(pattern of the even columns,
/// offset = 1)`; `swapped` is an SBUF copy of `x` `[P, 2 * 3]` read through the
/// pattern of its `[P, 3, 2]` transpose.
#[nki_kernel]
pub fn patterns(x: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let odd = nl::ndarray([p, f / 2], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(odd, x.ap(x[s![.., 0..f;2]].get_pattern(), offset = 1));
    let t = nl::ndarray([p, 2, 3], nl::float32);
    nisa::dma_copy(t, x.reshape([p, 2, 3]));
    let swapped = nl::ndarray([p, 3, 2], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(swapped, t.ap(t.permute([0, 2, 1]).get_pattern()));
    (odd, swapped)
}

#[test]
fn vector_select_gathers_rows_like_the_numpy_executor() {
    let (n, a, b, p) = (7usize, 2usize, 3usize, 5usize);
    let table: Vec<f64> = (0..n * a * b).map(|i| (i as f64) * 0.5 - 3.0).collect();
    let idx = [6.0, 0.0, 2.0, 2.0, 5.0];
    let want: Vec<f64> = idx.iter().flat_map(|&r| (0..a * b).map(move |k| r as usize * a * b + k)).map(|c| table[c]).collect();
    let out =
        select_rows::Call::new(&tensor(&[n, a, b], &table, Dtype::F32), &tensor(&[p, 1], &idx, Dtype::I32)).launch(&Launch::new()).unwrap();
    assert_close("emulated", &out.to_f32_vec(), &want, 0.0, 0.0);
    let pkg = common::package_of("vector_select_pkg", &[&select_rows::INFO]);
    let args = vec![vec![Arg::Tensor(vec![n, a, b], table.clone(), Dtype::F32), Arg::Tensor(vec![p, 1], idx.to_vec(), Dtype::I32)]];
    let np = common::run_numpy_ranks(&pkg, "select_rows", &args, 1, "fp32").swap_remove(0);
    assert_close("numpy", &np[0], &want, 0.0, 0.0);
    assert!(select_rows::NKI_SOURCE.contains("table.vector_select(dim=0, vector_offset=i)"), "{}", select_rows::NKI_SOURCE);
    // A row past the table is an error naming the kernel line.
    let bad = [1.0, 7.0, 0.0, 0.0, 0.0];
    let e = select_rows::Call::new(&tensor(&[n, a, b], &table, Dtype::F32), &tensor(&[p, 1], &bad, Dtype::I32))
        .launch(&Launch::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("selects row 7") && e.contains("tests/dsl/vector_select.rs"), "{e}");
}

#[test]
fn views_rebuilt_from_their_patterns_read_the_same_elements() {
    let (p, f) = (4usize, 6usize);
    let x: Vec<f64> = (0..p * f).map(|i| i as f64).collect();
    let want_odd: Vec<f64> = (0..p).flat_map(|r| (0..f / 2).map(move |j| (r * f + 2 * j + 1) as f64)).collect();
    let want_swapped: Vec<f64> = (0..p).flat_map(|r| (0..3).flat_map(move |j| (0..2).map(move |i| (r * f + 3 * i + j) as f64))).collect();
    let (odd, swapped) = patterns::Call::new(&tensor(&[p, f], &x, Dtype::F32)).launch(&Launch::new()).unwrap();
    assert_close("odd", &odd.to_f32_vec(), &want_odd, 0.0, 0.0);
    assert_close("swapped", &swapped.to_f32_vec(), &want_swapped, 0.0, 0.0);
    let pkg = common::package_of("get_pattern_pkg", &[&patterns::INFO]);
    let np = common::run_numpy_ranks(&pkg, "patterns", &[vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::F32)]], 1, "fp32").swap_remove(0);
    assert_close("numpy odd", &np[0], &want_odd, 0.0, 0.0);
    assert_close("numpy swapped", &np[1], &want_swapped, 0.0, 0.0);
}
