//! `nisa::dma_compute` in kernels: a three-way sum of HBM and SBUF sources into a
//! bf16 HBM tensor, and a scatter-add through `.ap(vector_offset = ..)` rows,
//! against float32 references of the docs and under the NumPy executor.

use crate::common;

use crate::common::{Arg, as_dtype, assert_close, tensor, uniform};
use nki::prelude::*;

/// `out = a + b + c` (`b` through SBUF as bf16), summed by the DMA engines.
#[nki_kernel]
pub fn sum3(a: Hbm, b: Hbm, c: Hbm) -> Hbm {
    let [p, f] = a.shape();
    let tb = nl::ndarray([p, f], nl::bfloat16);
    nisa::dma_copy(tb, b);
    let out = nl::ndarray([p, f], nl::bfloat16, buffer = nl::shared_hbm);
    nisa::dma_compute(out, [a, tb, c], nl::add, scales = [1.0, 1.0, 1.0]);
    out
}

/// `table` with row `idx[r]` increased by `upd[r]` for each r; rows past the
/// table are skipped.
#[nki_kernel]
pub fn scatter_add(table: Hbm, #[dtypes(int32)] idx: Hbm, upd: Hbm) -> Hbm {
    let [n, f] = table.shape();
    let [r, _] = upd.shape();
    let out = nl::ndarray([n, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, table);
    let i = nl::ndarray([r, 1], nl::int32);
    nisa::dma_copy(i, idx);
    let u = nl::ndarray([r, f], nl::float32);
    nisa::dma_copy(u, upd);
    nisa::dma_compute(
        out.ap([[f, r], [1, f]], vector_offset = i),
        [out.ap([[f, r], [1, f]], vector_offset = i), u],
        nl::add,
        oob_mode = nisa::oob_mode::skip,
    );
    out
}

fn bf16(v: f32) -> f32 {
    as_dtype(&[f64::from(v)], Dtype::Bf16)[0] as f32
}

#[test]
fn three_sources_sum_in_float32_into_bf16() {
    let (p, f) = (8usize, 5usize);
    let (a, b, c) = (uniform(p * f, 1, -2.0, 2.0), uniform(p * f, 2, -2.0, 2.0), uniform(p * f, 3, -2.0, 2.0));
    let a = as_dtype(&a, Dtype::F32);
    let c = as_dtype(&c, Dtype::F32);
    for (precision, mode) in [(Precision::Hardware, "hardware"), (Precision::Fp32, "fp32")] {
        // b passes through a bf16 tile (rounded in hardware precision only); the
        // float32 sum in list order is rounded into the bf16 dst likewise.
        let round = |v: f32| if precision == Precision::Hardware { bf16(v) } else { v };
        let want: Vec<f64> = (0..p * f).map(|i| f64::from(round((a[i] as f32 + round(b[i] as f32)) + c[i] as f32))).collect();
        let out = sum3::Call::new(&tensor(&[p, f], &a, Dtype::F32), &tensor(&[p, f], &b, Dtype::F32), &tensor(&[p, f], &c, Dtype::F32))
            .launch(&Launch::new().precision(precision))
            .unwrap();
        assert_close(mode, &out.to_f32_vec(), &want, 0.0, 0.0);
        let pkg = common::package_of("dma_compute_sum3_pkg", &[&sum3::INFO]);
        let args = vec![vec![
            Arg::Tensor(vec![p, f], a.clone(), Dtype::F32),
            Arg::Tensor(vec![p, f], b.clone(), Dtype::F32),
            Arg::Tensor(vec![p, f], c.clone(), Dtype::F32),
        ]];
        let np = common::run_numpy_ranks(&pkg, "sum3", &args, 1, mode).swap_remove(0);
        assert_close(mode, &np[0], &want, 0.0, 0.0);
    }
    assert!(
        sum3::NKI_SOURCE.contains("nisa.dma_compute(dst=out, srcs=[a, tb, c], reduce_op=nl.add, scales=[1.0, 1.0, 1.0])"),
        "{}",
        sum3::NKI_SOURCE
    );
}

#[test]
fn scatter_add_through_vector_offset_rows() {
    let (n, f) = (6usize, 4usize);
    let table: Vec<f64> = (0..n * f).map(|i| i as f64).collect();
    let upd: Vec<f64> = (0..3 * f).map(|i| 100.0 + i as f64).collect();
    // Row 9 is past the table: skipped.
    let idx = [4.0, 1.0, 9.0];
    let mut want = table.clone();
    for (r, row) in [(0usize, 4usize), (1, 1)] {
        for j in 0..f {
            want[row * f + j] += upd[r * f + j];
        }
    }
    let out = scatter_add::Call::new(
        &tensor(&[n, f], &table, Dtype::F32),
        &tensor(&[3, 1], &idx, Dtype::I32),
        &tensor(&[3, f], &upd, Dtype::F32),
    )
    .launch(&Launch::new())
    .unwrap();
    assert_close("emulated", &out.to_f32_vec(), &want, 0.0, 0.0);
    let pkg = common::package_of("dma_compute_scatter_pkg", &[&scatter_add::INFO]);
    let args = vec![vec![
        Arg::Tensor(vec![n, f], table.clone(), Dtype::F32),
        Arg::Tensor(vec![3, 1], idx.to_vec(), Dtype::I32),
        Arg::Tensor(vec![3, f], upd.clone(), Dtype::F32),
    ]];
    let np = common::run_numpy_ranks(&pkg, "scatter_add", &args, 1, "fp32").swap_remove(0);
    assert_close("numpy", &np[0], &want, 0.0, 0.0);
}

#[test]
fn a_profiled_launch_times_dma_compute_on_the_dma_queues() {
    let x = tensor(&[4, 4], &[1.0; 16], Dtype::F32);
    let launch = Launch::new().profile(nki::profile::Target::Trn2);
    let out = sum3::Call::new(&x, &x, &x).launch(&launch).unwrap();
    assert_eq!(out.to_f32_vec(), vec![3.0; 16]);
    let p = launch.profiled().unwrap();
    let ops: Vec<_> = p.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect();
    assert!(ops.contains(&("nisa.dma_compute", nki::profile::Unit::Dma)), "{ops:?}");
}
