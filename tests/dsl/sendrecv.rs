//! `nisa::sendrecv` in an LNC2 kernel: the two programs swap SBUF tiles, in the
//! emulator and under the NumPy executor; a program that never issues its side
//! ends the launch with an error naming the kernel line instead of hanging.

use crate::common;

use crate::common::{Arg, assert_close, tensor};
use nki::prelude::*;

/// `x` `[2, P, F]`: program p loads `x[p]`, swaps it with the other program
/// over pipe 0 (twice, the second time in place) and writes what it holds into
/// `out[p]`: `x[1 - p]` after one swap, `x[p]` after two.
#[nki_kernel]
pub fn swap(x: Hbm, twice: bool) -> Hbm {
    let [two, p, f] = x.shape();
    let me = nl::program_id(0);
    let other = 1 - me;
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x[s![me, .., ..]]);
    let r = nl::ndarray([p, f], nl::float32);
    nisa::sendrecv(t, r, other, other, 0);
    if twice {
        nisa::sendrecv(r, r, other, other, 0);
    }
    let out = nl::ndarray([two, p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out[s![me, .., ..]], r);
    out
}

/// [`swap`] once over the GpSimd DMA queue, which carries at most 1 KiB per partition.
#[nki_kernel]
pub fn swap_gpsimd(x: Hbm) -> Hbm {
    let [two, p, f] = x.shape();
    let me = nl::program_id(0);
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x[s![me, .., ..]]);
    let r = nl::ndarray([p, f], nl::float32);
    nisa::sendrecv(t, r, 1 - me, 1 - me, 1, dma_engine = nisa::dma_engine::gpsimd_dma);
    let out = nl::ndarray([two, p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out[s![me, .., ..]], r);
    out
}

/// Only program 0 issues the exchange: its partner finishes without it.
#[nki_kernel]
pub fn one_sided(x: Hbm) -> Hbm {
    let [p, f] = x.shape();
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x);
    if nl::program_id(0) == 0 {
        nisa::sendrecv(t, t, 1, 1, 3);
    }
    let out = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, t);
    out
}

#[test]
fn the_programs_of_an_lnc2_pair_swap_tiles() {
    let (p, f) = (4usize, 3usize);
    let x: Vec<f64> = (0..2 * p * f).map(|i| i as f64 + 0.25).collect();
    let swapped: Vec<f64> = x[p * f..].iter().chain(&x[..p * f]).copied().collect();
    let pkg = common::package_of("sendrecv_pkg", &[&swap::INFO]);
    for (twice, want) in [(false, &swapped), (true, &x)] {
        let out = swap::Call::new(&tensor(&[2, p, f], &x, Dtype::F32), twice).launch(&Launch::new().lnc(2)).unwrap();
        assert_close(&format!("emulated, twice = {twice}"), &out.to_f32_vec(), want, 0.0, 0.0);
        let args = vec![vec![Arg::Tensor(vec![2, p, f], x.clone(), Dtype::F32), Arg::Bool(twice)]];
        let np = common::run_numpy_ranks(&pkg, "swap", &args, 2, "fp32").swap_remove(0);
        assert_close(&format!("numpy, twice = {twice}"), &np[0], want, 0.0, 0.0);
    }
    assert!(
        swap::NKI_SOURCE.contains("nisa.sendrecv(src=t, dst=r, send_to_rank=other, recv_from_rank=other, pipe_id=0)"),
        "{}",
        swap::NKI_SOURCE
    );
}

#[test]
fn a_missing_partner_or_a_single_program_is_an_error_not_a_hang() {
    let x = tensor(&[2, 3], &[1.0; 6], Dtype::F32);
    // Run on a thread so a hang fails the test instead of stalling it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(one_sided::Call::new(&x).launch(&Launch::new().lnc(2)).unwrap_err().to_string()));
    let e = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the launch ends");
    assert!(e.contains("sendrecv") && e.contains("without joining") && e.contains("tests/dsl/sendrecv.rs"), "{e}");
    let x = tensor(&[2, 3], &[1.0; 6], Dtype::F32);
    let e = one_sided::Call::new(&x).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("nisa.sendrecv") && e.contains("LNC2"), "{e}");
}

#[test]
fn dma_engine_gpsimd_dma_swaps_up_to_one_kib_per_partition() {
    let pkg = common::package_of("sendrecv_gpsimd_pkg", &[&swap_gpsimd::INFO]);
    // 256 float32 per partition is exactly 1 KiB: it swaps in both artifacts.
    let (p, f) = (2usize, 256usize);
    let x: Vec<f64> = (0..2 * p * f).map(|i| i as f64 * 0.5).collect();
    let swapped: Vec<f64> = x[p * f..].iter().chain(&x[..p * f]).copied().collect();
    let out = swap_gpsimd::Call::new(&tensor(&[2, p, f], &x, Dtype::F32)).launch(&Launch::new().lnc(2)).unwrap();
    assert_close("emulated", &out.to_f32_vec(), &swapped, 0.0, 0.0);
    let args = vec![vec![Arg::Tensor(vec![2, p, f], x.clone(), Dtype::F32)]];
    let np = common::run_numpy_ranks(&pkg, "swap_gpsimd", &args, 2, "fp32").swap_remove(0);
    assert_close("numpy", &np[0], &swapped, 0.0, 0.0);
    assert!(swap_gpsimd::NKI_SOURCE.contains("pipe_id=1, dma_engine=nisa.dma_engine.gpsimd_dma)"), "{}", swap_gpsimd::NKI_SOURCE);
    // One element more per partition is refused by both, naming the limit.
    let f = 257usize;
    let x = vec![1.0; 2 * p * f];
    let e = swap_gpsimd::Call::new(&tensor(&[2, p, f], &x, Dtype::F32)).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(e.contains("dma_engine=gpsimd_dma") && e.contains("1024") && e.contains("1028"), "{e}");
    let args = vec![vec![Arg::Tensor(vec![2, p, f], x, Dtype::F32)]];
    let np = common::try_run_numpy_ranks(&pkg, "swap_gpsimd", &args, 2, "fp32").unwrap_err();
    assert!(np.contains("dma_engine=gpsimd_dma") && np.contains("1024"), "{np}");
}
