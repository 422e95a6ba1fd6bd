//! Indirect DMA in a kernel: `.ap(vector_offset = ..)` on a sliced view as the
//! source (a gather) and as the destination (a scatter) of `nisa::dma_copy`, with
//! an out-of-bound row skipped; the emulator and the emitted kernel under the
//! NumPy executor against the documented addressing.

mod common;

use common::{Arg, assert_close, package_of, run_numpy_ranks, tensor};
use nki::prelude::*;

/// Gathers rows of `table[:, 1:5]` at the offsets in `ids` (a `[2, 3]` tile, read
/// column by column) and scatters them back into a copy of `table[:, 0:4]`; a row
/// whose offset is outside the table is skipped by both DMAs.
#[nki_kernel]
pub fn gather_scatter(table: Hbm, ids: Hbm) -> (Hbm, Hbm) {
    let [v, _] = table.shape();
    let idx = nl::ndarray([2, 3], nl::int32);
    nisa::dma_copy(idx, ids);
    let rows = nl::ndarray([6, 4], nl::float32);
    nisa::memset(rows, -3.0);
    let cols = table[s![.., 1..5]];
    nisa::dma_copy(rows, cols.ap([[1, 6], [1, 4]], vector_offset = idx), oob_mode = nisa::oob_mode::skip);
    let gathered = nl::ndarray([6, 4], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(gathered, rows);
    let scattered = nl::ndarray([v, 4], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(scattered, table[s![.., 0..4]]);
    nisa::dma_copy(scattered.ap([[4, 6], [1, 4]], vector_offset = idx), rows, oob_mode = nisa::oob_mode::skip);
    (gathered, scattered)
}

#[test]
fn gather_and_scatter_agree_with_the_numpy_executor_and_the_addressing() {
    let (v, w) = (10usize, 6usize);
    let table: Vec<f64> = (0..v * w).map(|k| k as f64 * 0.5 - 7.0).collect();
    let ids = [7.0, 1.0, 12.0, 0.0, 4.0, 2.0];
    // Column-major offsets; 12 is past the table's 10 rows.
    let order = [7usize, 0, 1, 4, 12, 2];
    let mut gathered = Vec::new();
    for &r in &order {
        gathered.extend((1..5).map(|j| if r < v { table[r * w + j] } else { -3.0 }));
    }
    let mut scattered: Vec<f64> = (0..v).flat_map(|r| table[r * w..r * w + 4].to_vec()).collect();
    for (k, &r) in order.iter().enumerate() {
        if r < v {
            scattered[r * 4..r * 4 + 4].copy_from_slice(&gathered[k * 4..k * 4 + 4]);
        }
    }
    let (g, s) = gather_scatter::Call::new(&tensor(&[v, w], &table, Dtype::F32), &tensor(&[2, 3], &ids, Dtype::I32))
        .launch(&Launch::new().precision(Precision::Fp32))
        .unwrap();
    assert_close("emulated gather", &g.to_f32_vec(), &gathered, 0.0, 0.0);
    assert_close("emulated scatter", &s.to_f32_vec(), &scattered, 0.0, 0.0);
    let pkg = package_of("gather_scatter_pkg", &[&gather_scatter::INFO]);
    let args = vec![vec![Arg::Tensor(vec![v, w], table.clone(), Dtype::F32), Arg::Tensor(vec![2, 3], ids.to_vec(), Dtype::I32)]];
    let np = run_numpy_ranks(&pkg, "gather_scatter", &args, 1, "fp32").swap_remove(0);
    assert_close("numpy gather", &np[0], &gathered, 0.0, 0.0);
    assert_close("numpy scatter", &np[1], &scattered, 0.0, 0.0);
}
