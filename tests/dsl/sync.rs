//! `nisa::core_barrier` on an SBUF tile: each program of an LNC2 pair keeps the
//! tile for itself, so the barrier only synchronises the pair (as the library's
//! hybrid MoE loop meets on its SBUF block counter). The kernel compiles,
//! emulates, and its emitted NKI runs under the NumPy executor with the same result.

use crate::common;

use crate::common::{Arg, assert_close, tensor};
use nki::prelude::*;

/// `x` `[2, P, F]`: both programs step a counter of their own `steps` times,
/// meeting at a barrier on it after each step, then program p writes
/// `x[p] + steps` into `out[p]`.
#[nki_kernel]
pub fn barrier_on_counter(x: Hbm, steps: i64) -> Hbm {
    let [two, p, f] = x.shape();
    let me = nl::program_id(0);
    let count = nl::ndarray([p, 1], nl::float32);
    nisa::memset(count, 0.0);
    for _ in nl::sequential_range(steps) {
        nisa::tensor_scalar(count, count, nl::add, 1.0);
        nisa::core_barrier(count, [0, 1]);
    }
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x[s![me, .., ..]]);
    nisa::tensor_scalar(t, t, nl::add, count);
    let out = nl::ndarray([two, p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out[s![me, .., ..]], t);
    out
}

#[test]
fn a_core_barrier_on_an_sbuf_tile_synchronises_both_executors_alike() {
    let (p, f, steps) = (4usize, 3usize, 5i64);
    let x: Vec<f64> = (0..2 * p * f).map(|i| i as f64 * 0.5 - 3.0).collect();
    let want: Vec<f64> = x.iter().map(|v| v + steps as f64).collect();
    let out = barrier_on_counter::Call::new(&tensor(&[2, p, f], &x, Dtype::F32), steps).launch(&Launch::new().lnc(2)).unwrap();
    assert_close("emulated", &out.to_f32_vec(), &want, 0.0, 0.0);
    let pkg = common::package_of("sync_pkg", &[&barrier_on_counter::INFO]);
    let args = vec![vec![Arg::Tensor(vec![2, p, f], x, Dtype::F32), Arg::Int(steps)]];
    let np = common::run_numpy_ranks(&pkg, "barrier_on_counter", &args, 2, "fp32").swap_remove(0);
    assert_close("numpy", &np[0], &want, 0.0, 0.0);
    assert!(barrier_on_counter::NKI_SOURCE.contains("nisa.core_barrier(data=count, cores=(0, 1))"), "{}", barrier_on_counter::NKI_SOURCE);
}
