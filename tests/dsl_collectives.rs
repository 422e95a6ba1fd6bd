//! A ring kernel written in the DSL: collectives emitted, emulated over several
//! ranks, and run under NumPy with ranks as threads.

mod common;

use nki::prelude::*;

/// Passes each rank's `[128, m]` block `hops` steps around a ring of `num_ranks`
/// ranks and returns what arrives, plus a column holding the id of the rank whose
/// data it is (from the collective's rank-id register).
#[nki_kernel]
pub fn ring_pass(x: Hbm, num_ranks: i64, hops: i64) -> (Hbm, Hbm) {
    let [p, m] = x.shape();
    let rg = ncc::ReplicaGroup([[0, 1, 2]]);
    assert!(num_ranks == 3, "this kernel is written for the ring (0, 1, 2)");
    let send = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    let recv = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(send, x);
    for step in 1..hops + 1 {
        ncc::collective_permute_implicit([[send]], [[recv]], rg);
        nisa::dma_copy(send, recv);
    }
    let who = nl::ndarray([1, 1], nl::int32, buffer = nl::shared_hbm);
    let reg = ncc::collective_permute_implicit_current_processing_rank_id(hops, rg);
    nisa::register_store(who, reg);
    (send, who)
}

#[test]
fn data_travels_to_successors_in_the_emulator_and_under_numpy() {
    let (p, m, hops) = (128usize, 8usize, 2i64);
    let inputs: Vec<Vec<f64>> = (0..3).map(|r| common::as_dtype(&common::uniform(p * m, 40 + r, -1.0, 1.0), Dtype::F32)).collect();
    let tensors: Vec<Tensor> = inputs.iter().map(|v| common::tensor(&[p, m], v, Dtype::F32)).collect();
    let outs = Launch::new()
        .ranks(3)
        .precision(Precision::Fp32)
        .run_ranks(|ctx| ring_pass::Call::new(&tensors[ctx.rank()], 3, hops).run(ctx))
        .unwrap();
    for (r, (data, who)) in outs.iter().enumerate() {
        let from = (r + 3 - hops as usize) % 3;
        assert_eq!(who.to_i64_vec(), vec![from as i64], "rank {r}");
        common::assert_close(&format!("rank {r}"), &data.to_f32_vec(), &inputs[from], 0.0, 0.0);
    }
    let args: Vec<Vec<common::Arg>> = inputs
        .iter()
        .map(|v| vec![common::Arg::Tensor(vec![p, m], v.clone(), Dtype::F32), common::Arg::Int(3), common::Arg::Int(hops)])
        .collect();
    let pkg = common::package_of("ring_pass_pkg", &[&ring_pass::INFO]);
    let (ok, out, err) = common::harness(&["check", &pkg.display().to_string()]);
    assert!(ok, "{out}{err}");
    let np = common::run_numpy_ranks(&pkg, "ring_pass", &args, 1, "fp32");
    for (r, outs) in np.iter().enumerate() {
        let from = (r + 3 - hops as usize) % 3;
        common::assert_close(&format!("numpy rank {r}"), &outs[0], &inputs[from], 0.0, 0.0);
        assert_eq!(outs[1], vec![from as f32], "numpy rank id on rank {r}");
    }
}
