//! Collective kernels written in the DSL: emitted, emulated over several
//! ranks, and run under NumPy with ranks as threads: the ring permutes and the
//! group collectives.

use crate::common;

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

/// One ring permute over `channels` channels, each a block of `m / channels`
/// columns, in `num_groups` rings of `ring` consecutive ranks: the rings, the lists of
/// each channel and the channel ids are all comprehensions over counts known
/// only when the kernel is traced.
#[nki_kernel]
pub fn channel_ring(x: Hbm, ring: i64, num_groups: i64, channels: i64) -> Hbm {
    let [p, m] = x.shape();
    let groups: Groups = (0..num_groups).map(|g| (0..ring).map(|r| g * ring + r).collect()).collect();
    let rg = ncc::ReplicaGroup(groups);
    let w = m / channels;
    let send = nl::ndarray([p, m], x.dtype(), buffer = nl::sbuf);
    let recv = nl::ndarray([p, m], x.dtype(), buffer = nl::sbuf);
    nisa::dma_copy(send, x);
    ncc::collective_permute_implicit(
        (0..channels).map(|c| [send[s![.., c * w..(c + 1) * w]]]).collect(),
        (0..channels).map(|c| [recv[s![.., c * w..(c + 1) * w]]]).collect(),
        rg,
        channel_ids = (0..channels).map(|c| c).collect(),
    );
    let out = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, recv);
    out
}

#[test]
fn comprehensions_name_rings_and_channels_in_the_emulator_and_under_numpy() {
    let (p, m, ranks, groups, channels) = (128usize, 8usize, 4usize, 2i64, 2i64);
    let inputs: Vec<Vec<f64>> =
        (0..ranks).map(|r| common::as_dtype(&common::uniform(p * m, 60 + r as u64, -1.0, 1.0), Dtype::F32)).collect();
    let tensors: Vec<Tensor> = inputs.iter().map(|v| common::tensor(&[p, m], v, Dtype::F32)).collect();
    let run = Launch::new()
        .ranks(ranks)
        .precision(Precision::Fp32)
        .run_all(|ctx| channel_ring::Call::new(&tensors[ctx.rank()], 2, groups, channels).run(ctx))
        .unwrap();
    // Rings (0, 1) and (2, 3): each rank receives its ring predecessor's block.
    let from = |r: usize| r / 2 * 2 + (r + 1) % 2;
    for r in 0..ranks {
        common::assert_close(&format!("rank {r}"), &run.results[r][0].to_f32_vec(), &inputs[from(r)], 0.0, 0.0);
    }
    let mut rings: Vec<Vec<usize>> = run.comm.iter().map(|c| c.ring.clone()).collect();
    rings.sort();
    assert_eq!(rings, vec![vec![0, 1], vec![2, 3]]);
    for c in &run.comm {
        assert_eq!(c.messages, 2 * channels as usize, "one message per rank of the ring and channel");
        assert_eq!(c.bytes, 2 * p * m * 4, "every rank sends its whole tile");
    }
    let args: Vec<Vec<common::Arg>> = inputs
        .iter()
        .map(|v| {
            vec![
                common::Arg::Tensor(vec![p, m], v.clone(), Dtype::F32),
                common::Arg::Int(2),
                common::Arg::Int(groups),
                common::Arg::Int(channels),
            ]
        })
        .collect();
    let pkg = common::package_of("channel_ring_pkg", &[&channel_ring::INFO]);
    let np = common::run_numpy_ranks(&pkg, "channel_ring", &args, 1, "fp32");
    for (r, outs) in np.iter().enumerate() {
        common::assert_close(&format!("numpy rank {r}"), &outs[0], &inputs[from(r)], 0.0, 0.0);
    }
}

/// Group collectives in pairs of ranks listed out of order (`[1, 0]`, `[3, 2]`):
/// the pair's sum rounded to bf16, an all-to-all of the halves of `x`, and the
/// pair's tiles side by side (an SBUF gather along the free dim).
#[nki_kernel]
pub fn pair_exchange(x: Hbm) -> (Hbm, Hbm, Hbm) {
    let [p, m] = x.shape();
    let rg = ncc::ReplicaGroup([[1, 0], [3, 2]]);
    let summed = nl::ndarray([p, m], nl::bfloat16, buffer = nl::shared_hbm);
    ncc::all_reduce([x], [summed], rg, nl::add);
    let swapped = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    ncc::all_to_all([x], [swapped], rg, 0);
    let tile = nl::ndarray([p, m], x.dtype(), buffer = nl::sbuf);
    nisa::dma_copy(tile, x);
    let wide_tile = nl::ndarray([p, 2 * m], x.dtype(), buffer = nl::sbuf);
    ncc::all_gather([tile], [wide_tile], rg, 1);
    let wide = nl::ndarray([p, 2 * m], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(wide, wide_tile);
    (summed, swapped, wide)
}

#[test]
fn group_collectives_follow_member_order_in_the_emulator_and_under_numpy() {
    let (p, m) = (128usize, 8usize);
    let inputs: Vec<Vec<f64>> = (0..4).map(|r| common::as_dtype(&common::uniform(p * m, 50 + r, -1.0, 1.0), Dtype::F32)).collect();
    // The pair of each rank, in group order.
    let pair = |r: usize| if r < 2 { [1, 0] } else { [3, 2] };
    let want = |r: usize| -> [Vec<f64>; 3] {
        let [a, b] = pair(r).map(|q| &inputs[q]);
        let sum = common::as_dtype(&a.iter().zip(b).map(|(x, y)| x + y).collect::<Vec<_>>(), Dtype::Bf16);
        // Member k gets chunk k (rows k·p/2 ..) of both members, in member order.
        let k = pair(r).iter().position(|&q| q == r).unwrap();
        let half = p / 2 * m;
        let swapped = [a, b].iter().flat_map(|s| s[k * half..(k + 1) * half].to_vec()).collect();
        let wide = (0..p).flat_map(|i| [a, b].iter().flat_map(|s| s[i * m..(i + 1) * m].to_vec()).collect::<Vec<_>>()).collect();
        [sum, swapped, wide]
    };
    let tensors: Vec<Tensor> = inputs.iter().map(|v| common::tensor(&[p, m], v, Dtype::F32)).collect();
    let outs = Launch::new().ranks(4).run_ranks(|ctx| pair_exchange::Call::new(&tensors[ctx.rank()]).run(ctx)).unwrap();
    let args: Vec<Vec<common::Arg>> = inputs.iter().map(|v| vec![common::Arg::Tensor(vec![p, m], v.clone(), Dtype::F32)]).collect();
    let pkg = common::package_of("pair_exchange_pkg", &[&pair_exchange::INFO]);
    let np = common::run_numpy_ranks(&pkg, "pair_exchange", &args, 1, "hardware");
    for (r, (summed, swapped, wide)) in outs.iter().enumerate() {
        let [ws, wx, ww] = want(r);
        common::assert_close(&format!("all_reduce rank {r}"), &summed.to_f32_vec(), &ws, 0.0, 0.0);
        common::assert_close(&format!("all_to_all rank {r}"), &swapped.to_f32_vec(), &wx, 0.0, 0.0);
        common::assert_close(&format!("all_gather rank {r}"), &wide.to_f32_vec(), &ww, 0.0, 0.0);
        for (i, (got, w)) in np[r].iter().zip([ws, wx, ww]).enumerate() {
            common::assert_close(&format!("numpy rank {r} output {i}"), got, &w, 0.0, 0.0);
        }
    }
}

/// `x` sent along explicit source-target pairs (rank 1 is no target and keeps
/// its own copy), and each rank's id from `ncc::rank_id`.
#[nki_kernel]
pub fn pair_permute(x: Hbm) -> (Hbm, Hbm) {
    let [p, m] = x.shape();
    let got = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(got, x);
    ncc::collective_permute([x], [got], [[0, 2], [2, 0], [1, 3]]);
    let who = nl::ndarray([1, 1], nl::int32, buffer = nl::shared_hbm);
    let reg = ncc::rank_id();
    nisa::register_store(who, reg);
    (got, who)
}

#[test]
fn source_target_pairs_and_rank_ids_in_the_emulator_and_under_numpy() {
    let (p, m) = (128usize, 4usize);
    let inputs: Vec<Vec<f64>> = (0..4).map(|r| common::as_dtype(&common::uniform(p * m, 60 + r, -1.0, 1.0), Dtype::F32)).collect();
    let from = [2, 1, 0, 1];
    let tensors: Vec<Tensor> = inputs.iter().map(|v| common::tensor(&[p, m], v, Dtype::F32)).collect();
    let outs = Launch::new().ranks(4).run_ranks(|ctx| pair_permute::Call::new(&tensors[ctx.rank()]).run(ctx)).unwrap();
    let args: Vec<Vec<common::Arg>> = inputs.iter().map(|v| vec![common::Arg::Tensor(vec![p, m], v.clone(), Dtype::F32)]).collect();
    let pkg = common::package_of("pair_permute_pkg", &[&pair_permute::INFO]);
    let np = common::run_numpy_ranks(&pkg, "pair_permute", &args, 1, "fp32");
    for (r, (got, who)) in outs.iter().enumerate() {
        common::assert_close(&format!("rank {r}"), &got.to_f32_vec(), &inputs[from[r]], 0.0, 0.0);
        assert_eq!(who.to_i64_vec(), vec![r as i64]);
        common::assert_close(&format!("numpy rank {r}"), &np[r][0], &inputs[from[r]], 0.0, 0.0);
        assert_eq!(np[r][1], vec![r as f32], "numpy rank id on rank {r}");
    }
}

/// `x` exchanged in variable-size chunks over three ranks by the counts and
/// displacements in `meta` (`[3, 3]` uint32; its receive counts come back).
#[nki_kernel]
pub fn variable_exchange(x: Hbm, #[dtypes(uint32)] meta: Hbm) -> (Hbm, Hbm) {
    let [n] = x.shape();
    let rg = ncc::ReplicaGroup([[2, 0, 1]]);
    let got = nl::ndarray([n], x.dtype(), buffer = nl::shared_hbm);
    let zero = nl::ndarray([n], x.dtype(), buffer = nl::sbuf);
    nisa::memset(zero, 0.0);
    nisa::dma_copy(got, zero);
    ncc::all_to_all_v([x], [got], rg, meta);
    (got, meta)
}

/// `x`'s first `count` elements gathered from four ranks of an LNC2 launch.
#[nki_kernel]
pub fn variable_gather(x: Hbm, #[dtypes(uint32)] meta: Hbm) -> Hbm {
    let [n] = x.shape();
    let got = nl::ndarray([4 * n], x.dtype(), buffer = nl::shared_hbm);
    ncc::all_gather_v([x], [got], ncc::ReplicaGroup([[0, 1, 2, 3]]), meta, recv_counts_known = true);
    got
}

#[test]
fn variable_size_collectives_match_between_the_emulator_and_numpy() {
    let n = 12usize;
    let x: Vec<Vec<f64>> = (0..4).map(|r| (0..n).map(|i| (100 * r + i) as f64).collect()).collect();
    // Member m of [2, 0, 1] sends (m + j) % 4 + 1 elements from 2 j to member j.
    let meta: Vec<Vec<f64>> = (0..3)
        .map(|r| {
            let m = [1, 2, 0][r];
            let counts = (0..3).map(|j| ((m + j) % 4 + 1) as f64);
            counts.chain((0..3).map(|j| (2 * j) as f64)).chain([0.0; 3]).collect()
        })
        .collect();
    let args: Vec<Vec<common::Arg>> = (0..3)
        .map(|r| vec![common::Arg::Tensor(vec![n], x[r].clone(), Dtype::F32), common::Arg::Tensor(vec![3, 3], meta[r].clone(), Dtype::U32)])
        .collect();
    let pkg = common::package_of("variable_pkg", &[&variable_exchange::INFO, &variable_gather::INFO]);
    let np = common::run_numpy_ranks(&pkg, "variable_exchange", &args, 1, "fp32");
    let ins: Vec<(Tensor, Tensor)> =
        (0..3).map(|r| (common::tensor(&[n], &x[r], Dtype::F32), common::tensor(&[3, 3], &meta[r], Dtype::U32))).collect();
    let outs =
        Launch::new().ranks(3).run_ranks(|ctx| variable_exchange::Call::new(&ins[ctx.rank()].0, &ins[ctx.rank()].1).run(ctx)).unwrap();
    for r in 0..3 {
        let m = [1, 2, 0][r];
        // Chunk from member i (rank [2, 0, 1][i]) lands at slot i.
        let mut want = vec![0.0; n];
        for (i, &from) in [2usize, 0, 1].iter().enumerate() {
            let count = (i + m) % 4 + 1;
            want[4 * i..4 * i + count].copy_from_slice(&x[from][2 * m..2 * m + count]);
        }
        common::assert_close(&format!("emulator rank {r}"), &outs[r].0.to_f32_vec(), &want, 0.0, 0.0);
        common::assert_close(&format!("numpy rank {r}"), &np[r][0], &want, 0.0, 0.0);
        let counts: Vec<f32> = (0..3).map(|i| ((i + m) % 4 + 1) as f32).collect();
        assert_eq!(np[r][1][6..9], counts[..], "numpy receive counts on rank {r}");
        assert_eq!(outs[r].1.to_f32_vec()[6..9], counts[..], "emulator receive counts on rank {r}");
    }
    // all_gather_v: rank r sends r + 1 elements from element r; LNC2, four ranks.
    let meta: Vec<Vec<f64>> = (0..4).map(|r| vec![(r + 1) as f64, 0.0, 0.0, 0.0, r as f64, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]).collect();
    let args: Vec<Vec<common::Arg>> = (0..4)
        .map(|r| vec![common::Arg::Tensor(vec![n], x[r].clone(), Dtype::F32), common::Arg::Tensor(vec![3, 4], meta[r].clone(), Dtype::U32)])
        .collect();
    let np = common::run_numpy_ranks(&pkg, "variable_gather", &args, 2, "fp32");
    let ins: Vec<(Tensor, Tensor)> =
        (0..4).map(|r| (common::tensor(&[n], &x[r], Dtype::F32), common::tensor(&[3, 4], &meta[r], Dtype::U32))).collect();
    let outs =
        Launch::new().ranks(4).lnc(2).run_ranks(|ctx| variable_gather::Call::new(&ins[ctx.rank()].0, &ins[ctx.rank()].1).run(ctx)).unwrap();
    for r in 0..4 {
        let got_emu = outs[r].to_f32_vec();
        for s in 0..4 {
            let want: Vec<f64> = x[s][s..2 * s + 1].to_vec();
            common::assert_close(&format!("emulator rank {r} from {s}"), &got_emu[n * s..n * s + s + 1], &want, 0.0, 0.0);
            common::assert_close(&format!("numpy rank {r} from {s}"), &np[r][0][n * s..n * s + s + 1], &want, 0.0, 0.0);
        }
    }
}
