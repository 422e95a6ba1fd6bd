//! `nisa::local_gather` in a kernel: the emulator and the emitted kernel under the
//! NumPy executor against the documented per-core gather.

use crate::common::{Arg, assert_close, package_of, run_numpy_ranks, tensor, uniform};
use nki::prelude::*;

/// Loads `x` `[32, 24]` and `idx` `[32, 2]` (uint16) into SBUF and gathers
/// `valid` runs of 4 elements per partition at its core's indices.
#[nki_kernel]
pub fn runs(x: Hbm, #[dtypes(uint16)] idx: Hbm, valid: i64) -> Hbm {
    let [p, f] = x.shape();
    let [_, ni] = idx.shape();
    let s = nl::ndarray([p, f], x.dtype());
    nisa::dma_copy(s, x);
    let i = nl::ndarray([p, ni], nl::uint16);
    nisa::dma_copy(i, idx);
    let d = nl::ndarray([p, valid * 4], x.dtype());
    nisa::local_gather(d, s, i, num_elem_per_idx = 4, num_valid_indices = valid);
    let out = nl::ndarray([p, valid * 4], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, d);
    out
}

#[test]
fn local_gather_agrees_with_the_numpy_executor_and_the_docstring() {
    let (np, nf, ni, valid) = (32usize, 24usize, 2usize, 27usize);
    let x = uniform(np * nf, 81, -4.0, 4.0);
    let idx: Vec<f64> = uniform(np * ni, 82, 0.0, (nf - 3) as f64).iter().map(|v| v.floor()).collect();
    // Core c's k-th index is idx[c*16 + k % 16, k / 16]; partition p copies x[p, o..o+4].
    let mut want = Vec::new();
    for p in 0..np {
        for k in 0..valid {
            let o = idx[(p / 16 * 16 + k % 16) * ni + k / 16] as usize;
            want.extend((0..4).map(|e| x[p * nf + o + e] as f32 as f64));
        }
    }
    let out = runs::Call::new(&tensor(&[np, nf], &x, Dtype::F32), &tensor(&[np, ni], &idx, Dtype::U16), valid as i64)
        .launch(&Launch::new())
        .unwrap();
    assert_close("emulated local_gather", &out.to_f32_vec(), &want, 0.0, 0.0);
    let pkg = package_of("local_gather_pkg", &[&runs::INFO]);
    let args = vec![vec![Arg::Tensor(vec![np, nf], x, Dtype::F32), Arg::Tensor(vec![np, ni], idx, Dtype::U16), Arg::Int(valid as i64)]];
    assert_close("numpy local_gather", &run_numpy_ranks(&pkg, "runs", &args, 1, "hardware").swap_remove(0)[0], &want, 0.0, 0.0);
}

#[test]
fn a_profiled_launch_records_local_gather_on_the_gpsimd_engine() {
    let x = tensor(&[32, 24], &uniform(32 * 24, 83, -1.0, 1.0), Dtype::F32);
    let idx = tensor(&[32, 2], &[3.0; 64], Dtype::U16);
    let launch = Launch::new().profile(nki::profile::Target::Trn2);
    runs::Call::new(&x, &idx, 8).launch(&launch).unwrap();
    let p = launch.profiled().unwrap();
    let ops: Vec<_> = p.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect();
    assert!(ops.contains(&("nisa.local_gather", nki::profile::Unit::GpSimd)), "{ops:?}");
}
