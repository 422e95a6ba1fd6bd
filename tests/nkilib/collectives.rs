//! The library's experimental collectives against their documented semantics.
//!
//! `fine_grained_allgather`: every rank's result, read row-major, is the
//! concatenation of its ring's inputs in ring order, over the library's test
//! configuration and smaller ones covering LNC 1 and 2, one and four channels,
//! both paths (SBUF, HBM when forced and when the SBUF budget is short), in
//! both precision modes (a second ring's global rank ids are refused as slots,
//! as the library's are); the permutes each rank sends are
//! `RANK_N - 1` ring steps of its whole input; the emitted kernel under NumPy
//! equals the emulator; its rules.
//!
//! `allgather_compute_matmul`: every rank's result, read row-major, is its
//! ring's inputs stacked in ring order times the rank's own `rhs` (float64
//! reference), at the library's test size and the configurations its test
//! lists, both paths, `rhs` held and streamed, both precision modes; the
//! permutes carry every rank's whole `lhs` `RANK_N - 1` times; NumPy equals
//! the emulator; its rules.
//!
//! `allgather_sb2sb` and `allgather_sb2sb_tiled`, given the group as an
//! `ncc.ReplicaGroup`: every rank holds its group's inputs side by side in
//! group order, bit for bit, over one and two groups and groups out of rank
//! order, LNC 1 and 2, one and several row tiles; the all-gathers carry each
//! group's inputs once per program that gathers them; NumPy (the group passed
//! as an `ncc.ReplicaGroup`) equals the emulator; their rules.
//!
//! `topk_reduce`: each token's output row is the float64 sum of its rows
//! (found by their packed int32 index among padding rows), within the library
//! test's tolerance, at its configurations; NumPy equals the emulator; its
//! rules.

use crate::common::{self, Arg, assert_refused_by, emitted_package};
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::experimental::collectives::fg_allgather::{
    FineGrainedAllGatherRule, FineGrainedAllGatherShape, channel_count, fine_grained_allgather, fine_grained_allgather_violation,
};
use nkilib::experimental::collectives::fgcc_matmul::{
    AllGatherMatmulRule, AllGatherMatmulShape, allgather_compute_matmul, allgather_compute_matmul_violation,
};

/// One all-gather: each rank's `[m, k]` input, `tp` ranks per ring, `groups`
/// rings, `lnc` programs per rank.
#[derive(Clone, Copy, Debug)]
struct Gather {
    m: usize,
    k: usize,
    tp: usize,
    groups: usize,
    lnc: usize,
    dtype: Dtype,
    force_hbm_cc: bool,
}

impl Gather {
    fn name(&self) -> String {
        format!(
            "m{}_k{}_tp{}x{}_lnc{}_{:?}{}",
            self.m,
            self.k,
            self.tp,
            self.groups,
            self.lnc,
            self.dtype,
            if self.force_hbm_cc { "_hbm" } else { "" }
        )
    }

    fn ranks(&self) -> usize {
        self.tp * self.groups
    }

    /// Rank `r`'s input, rounded to the dtype.
    fn input(&self, r: usize) -> Vec<f64> {
        common::as_dtype(&common::uniform(self.m * self.k, common::seed_of(&self.name()) + r as u64, -2.0, 2.0), self.dtype)
    }

    /// What every rank of ring `g` holds: its ranks' inputs stacked in ring order.
    fn reference(&self, rank: usize) -> Vec<f64> {
        let g = rank / self.tp;
        (g * self.tp..(g + 1) * self.tp).flat_map(|r| self.input(r)).collect()
    }

    /// The emulator's results and collectives.
    fn run(&self, precision: Precision) -> nki::emulator::RunReport<Tensor> {
        let inputs: Vec<Tensor> = (0..self.ranks()).map(|r| common::tensor(&[self.m, self.k], &self.input(r), self.dtype)).collect();
        Launch::new()
            .ranks(self.ranks())
            .lnc(self.lnc)
            .precision(precision)
            .run_all(|ctx| {
                fine_grained_allgather::Call::new(&inputs[ctx.rank()], self.tp as i64, self.groups as i64)
                    .force_hbm_cc(self.force_hbm_cc)
                    .run(ctx)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    /// Results equal to the reference, bit for bit (the kernel only moves
    /// data), and the ring steps each carry every rank's whole input.
    fn check(&self, precision: Precision) {
        let run = self.run(precision);
        for r in 0..self.ranks() {
            let got = run.results[r][0].to_f32_vec();
            assert_eq!(got.len(), self.tp * self.m * self.k, "{}", self.name());
            common::assert_close(&format!("{} rank {r} {precision:?}", self.name()), &got, &self.reference(r), 0.0, 0.0);
        }
        let channels = channel_count(self.tp as i64, self.lnc as i64, true) as usize;
        let bytes = self.m * self.k * self.dtype.size_bytes();
        for g in 0..self.groups {
            let ring: Vec<usize> = (g * self.tp..(g + 1) * self.tp).collect();
            let steps: Vec<_> = run.comm.iter().filter(|c| c.ring == ring).collect();
            assert_eq!(steps.len(), self.tp - 1, "{}: ring {g} turns RANK_N - 1 times", self.name());
            for s in steps {
                assert_eq!(s.op, "collective_permute_implicit");
                assert_eq!(s.messages, self.tp * channels, "{}: one message per rank and channel", self.name());
                assert_eq!(s.bytes, self.tp * bytes, "{}: every rank sends its whole input each step", self.name());
            }
        }
    }

    /// The emitted kernel under NumPy against the emulator.
    fn check_numpy(&self) {
        let run = self.run(Precision::Hardware);
        let args: Vec<Vec<Arg>> = (0..self.ranks())
            .map(|r| {
                vec![
                    Arg::Tensor(vec![self.m, self.k], self.input(r), self.dtype),
                    Arg::Int(self.tp as i64),
                    Arg::Int(self.groups as i64),
                    Arg::Bool(self.force_hbm_cc),
                ]
            })
            .collect();
        assert_numpy_ranks_equal(&self.name(), "fine_grained_allgather", &args, self.lnc, &run);
    }
}

/// Runs `kernel` of the emitted package on every rank's `args` under the NumPy
/// executor (hardware precision) and asserts each rank's first output equals
/// the emulator's in `run`.
fn assert_numpy_ranks_equal(what: &str, kernel: &str, args: &[Vec<Arg>], lnc: usize, run: &nki::emulator::RunReport<Tensor>) {
    let np = common::run_numpy_ranks(emitted_package(), kernel, args, lnc, "hardware");
    assert_eq!(np.len(), run.results.len(), "{what}: ranks");
    for (r, outs) in np.iter().enumerate() {
        assert_eq!(outs[0], run.results[r][0].to_f32_vec(), "{what}: numpy rank {r}");
    }
}

const fn gather(m: usize, k: usize, tp: usize, lnc: usize, dtype: Dtype) -> Gather {
    Gather { m, k, tp, groups: 1, lnc, dtype, force_hbm_cc: false }
}

/// The library's test configuration: `[1024, 4096]` bf16 over 4 ranks, LNC 2
/// (two channels, the SBUF path).
#[test]
fn fine_grained_allgather_matches_the_library_test() {
    gather(1024, 4096, 4, 2, Dtype::Bf16).check(Precision::Hardware);
}

/// LNC 1 and 2, four and eight ranks (four ring steps), both paths and both
/// precision modes.
#[test]
fn fine_grained_allgather_gathers_every_ring() {
    let cases = [
        gather(256, 512, 4, 1, Dtype::Bf16),
        gather(256, 384, 8, 2, Dtype::F32),
        gather(128, 256, 4, 2, Dtype::F16),
        Gather { force_hbm_cc: true, ..gather(256, 512, 4, 2, Dtype::Bf16) },
        Gather { force_hbm_cc: true, ..gather(128, 256, 8, 1, Dtype::F32) },
    ];
    for c in cases {
        c.check(Precision::Hardware);
        c.check(Precision::Fp32);
    }
}

/// Four channels per program at 64 ranks.
#[test]
fn fine_grained_allgather_uses_four_channels_at_64_ranks() {
    gather(64, 128, 64, 2, Dtype::Bf16).check(Precision::Hardware);
}

/// Both buffers past the 24 MiB SBUF budget: the HBM path, in blocks of the
/// six row tiles the budget holds, the last block cut at the slice's end.
#[test]
fn fine_grained_allgather_takes_hbm_when_sbuf_is_short() {
    gather(1024, 8192, 2, 1, Dtype::F32).check(Precision::Hardware);
}

/// The rank a ring iteration processes is a global rank id, and it picks the
/// result's slot among `RANK_N`: in a second ring (ranks 4..8 of two rings of
/// 4) the slot is past the result, and the copy is refused as the library's is.
#[test]
fn fine_grained_allgather_refuses_the_slots_of_later_rings() {
    let c = Gather { groups: 2, ..gather(128, 256, 4, 1, Dtype::F32) };
    let inputs: Vec<Tensor> = (0..c.ranks()).map(|r| common::tensor(&[c.m, c.k], &c.input(r), c.dtype)).collect();
    let err = Launch::new()
        .ranks(c.ranks())
        .run_ranks(|ctx| fine_grained_allgather::Call::new(&inputs[ctx.rank()], 4, 2).run(ctx))
        .expect_err("rank 4's slot is past a 4-slot result");
    // Whichever second-ring rank's copy fails first is reported (the ranks
    // run as threads): its offset is that rank's global id, 4 to 7.
    let msg = err.to_string();
    assert!((4..8).any(|r| msg.contains(&format!("scalar_offset {r} moves"))), "{msg}");
}

#[test]
fn fine_grained_allgather_under_numpy_matches_the_emulator() {
    for c in [
        gather(256, 512, 4, 2, Dtype::Bf16),
        gather(128, 256, 4, 1, Dtype::F32),
        Gather { force_hbm_cc: true, ..gather(128, 256, 4, 2, Dtype::Bf16) },
    ] {
        c.check_numpy();
    }
}

#[test]
fn fine_grained_allgather_rules() {
    let ok = FineGrainedAllGatherShape { m: 1024, k: 4096, tp_degree: 4, num_groups: 1, lnc: 2, nc_version_3: true };
    assert_eq!(fine_grained_allgather_violation(ok), None);
    let refused = [
        (FineGrainedAllGatherShape { tp_degree: 3, ..ok }, FineGrainedAllGatherRule::TpDegree),
        (FineGrainedAllGatherShape { num_groups: 0, ..ok }, FineGrainedAllGatherRule::NumGroups),
        (FineGrainedAllGatherShape { m: 1022, ..ok }, FineGrainedAllGatherRule::Rows),
        (FineGrainedAllGatherShape { m: 4 * 200, ..ok }, FineGrainedAllGatherRule::Tiles),
        (FineGrainedAllGatherShape { k: 200, ..ok }, FineGrainedAllGatherRule::Tiles),
    ];
    assert_refused_by(fine_grained_allgather_violation, refused);
    // 32 ranks take four channels only before trn2.
    assert_eq!(channel_count(32, 2, true), 2);
    assert_eq!(channel_count(32, 2, false), 4);
    assert_eq!(channel_count(128, 1, true), 1);
    // The kernel refuses at trace time with the rule's words.
    let x = common::tensor(&[6, 128], &[0.0; 6 * 128], Dtype::F32);
    let err = Launch::new()
        .ranks(4)
        .lnc(2)
        .run_ranks(|ctx| fine_grained_allgather::Call::new(&x, 4, 1).run(ctx))
        .expect_err("6 rows do not split over 2 programs and 2 channels");
    assert!(err.to_string().contains(FineGrainedAllGatherRule::Rows.message()), "{err}");
}

/// One all-gather matmul: each rank's `[m, k]` rows and its own `[k, n]`
/// `rhs`, `tp` ranks per ring, `lnc` programs per rank.
#[derive(Clone, Copy, Debug)]
struct GatherMatmul {
    m: usize,
    k: usize,
    n: usize,
    tp: usize,
    lnc: usize,
    dtype: Dtype,
    force_hbm_cc: bool,
}

impl GatherMatmul {
    fn name(&self) -> String {
        format!(
            "agmm_m{}_k{}_n{}_tp{}_lnc{}_{:?}{}",
            self.m,
            self.k,
            self.n,
            self.tp,
            self.lnc,
            self.dtype,
            if self.force_hbm_cc { "_hbm" } else { "" }
        )
    }

    /// Rank `r`'s rows, rounded to the dtype.
    fn lhs(&self, r: usize) -> Vec<f64> {
        common::as_dtype(&common::uniform(self.m * self.k, common::seed_of(&self.name()) + r as u64, -1.0, 1.0), self.dtype)
    }

    /// Rank `r`'s column shard of the weights, rounded to the dtype.
    fn rhs(&self, r: usize) -> Vec<f64> {
        let seed = common::seed_of(&format!("{} rhs", self.name())) + r as u64;
        common::as_dtype(&common::uniform(self.k * self.n, seed, -1.0, 1.0), self.dtype)
    }

    /// Every rank's rows stacked in ring order, times rank `rank`'s `rhs`,
    /// in float64: `[tp · m, n]`.
    fn reference(&self, rank: usize) -> Vec<f64> {
        let gathered: Vec<f64> = (0..self.tp).flat_map(|r| self.lhs(r)).collect();
        common::matmul(&gathered, &self.rhs(rank), self.tp * self.m, self.k, self.n)
    }

    fn inputs(&self) -> (Vec<Tensor>, Vec<Tensor>) {
        let lhs = (0..self.tp).map(|r| common::tensor(&[self.m, self.k], &self.lhs(r), self.dtype)).collect();
        let rhs = (0..self.tp).map(|r| common::tensor(&[self.k, self.n], &self.rhs(r), self.dtype)).collect();
        (lhs, rhs)
    }

    fn run(&self, precision: Precision) -> nki::emulator::RunReport<Tensor> {
        let (lhs, rhs) = self.inputs();
        Launch::new()
            .ranks(self.tp)
            .lnc(self.lnc)
            .precision(precision)
            .run_all(|ctx| {
                allgather_compute_matmul::Call::new(&lhs[ctx.rank()], &rhs[ctx.rank()], self.tp as i64, 1)
                    .force_hbm_cc(self.force_hbm_cc)
                    .run(ctx)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    /// Every rank's product within the precision's bound of the float64
    /// reference (the result is stored in the input dtype), and the ring
    /// steps each carry every rank's whole input.
    fn check(&self, precision: Precision) {
        let run = self.run(precision);
        // Products accumulate in float32 and are stored in the input dtype:
        // fp32 results are close to float64 under fp32 arithmetic, bf16/fp16
        // ones within their rounding, hardware matmuls within bf16's.
        let rtol = match (precision, self.dtype) {
            (Precision::Fp32, Dtype::F32) => 1e-5,
            _ => 1e-2,
        };
        for r in 0..self.tp {
            let got = run.results[r][0].to_f32_vec();
            assert_eq!(got.len(), self.tp * self.m * self.n, "{}", self.name());
            common::assert_close(&format!("{} rank {r} {precision:?}", self.name()), &got, &self.reference(r), 0.0, rtol);
        }
        let channels = channel_count(self.tp as i64, self.lnc as i64, true) as usize;
        let steps: Vec<_> = run.comm.iter().collect();
        assert_eq!(steps.len(), self.tp - 1, "{}: the ring turns RANK_N - 1 times", self.name());
        for s in steps {
            assert_eq!(s.op, "collective_permute_implicit");
            assert_eq!(s.ring, (0..self.tp).collect::<Vec<_>>());
            assert_eq!(s.messages, self.tp * channels, "{}: one message per rank and channel", self.name());
            assert_eq!(s.bytes, self.tp * self.m * self.k * self.dtype.size_bytes(), "{}: every rank sends its whole lhs", self.name());
        }
    }

    /// The emitted kernel under NumPy against the emulator.
    fn check_numpy(&self) {
        let run = self.run(Precision::Hardware);
        let args: Vec<Vec<Arg>> = (0..self.tp)
            .map(|r| {
                vec![
                    Arg::Tensor(vec![self.m, self.k], self.lhs(r), self.dtype),
                    Arg::Tensor(vec![self.k, self.n], self.rhs(r), self.dtype),
                    Arg::Int(self.tp as i64),
                    Arg::Int(1),
                    Arg::Bool(self.force_hbm_cc),
                ]
            })
            .collect();
        assert_numpy_ranks_equal(&self.name(), "allgather_compute_matmul", &args, self.lnc, &run);
    }
}

const fn gather_matmul(m: usize, k: usize, n: usize, tp: usize, lnc: usize, dtype: Dtype) -> GatherMatmul {
    GatherMatmul { m, k, n, tp, lnc, dtype, force_hbm_cc: false }
}

/// The library's test configuration: `[1024, 4096]` rows per rank, a
/// `[4096, 4096]` weight split over 4 ranks (`N = 1024` each), bf16, LNC 2:
/// `rhs` and the rows both in SBUF.
#[test]
fn allgather_compute_matmul_matches_the_library_test() {
    gather_matmul(1024, 4096, 1024, 4, 2, Dtype::Bf16).check(Precision::Hardware);
}

/// The configurations the library's test lists (at its smaller sizes), with
/// the weight's columns split over the ranks: LNC 1 and 2, fp32 and bf16,
/// the forced HBM path, 16 ranks; both precision modes.
#[test]
fn allgather_compute_matmul_over_the_listed_configurations() {
    let cases = [
        gather_matmul(256, 1024, 256, 4, 2, Dtype::Bf16),
        gather_matmul(256, 1024, 256, 4, 2, Dtype::F32),
        gather_matmul(256, 1024, 256, 4, 1, Dtype::Bf16),
        GatherMatmul { force_hbm_cc: true, ..gather_matmul(256, 1024, 256, 4, 2, Dtype::Bf16) },
        GatherMatmul { force_hbm_cc: true, ..gather_matmul(256, 1024, 256, 4, 1, Dtype::Bf16) },
        gather_matmul(512, 1024, 64, 16, 2, Dtype::Bf16),
    ];
    for c in cases {
        c.check(Precision::Hardware);
        c.check(Precision::Fp32);
    }
}

/// Four channels per program at 64 ranks.
#[test]
fn allgather_compute_matmul_uses_four_channels_at_64_ranks() {
    gather_matmul(64, 128, 16, 64, 2, Dtype::Bf16).check(Precision::Hardware);
}

/// `rhs` past 16 MiB twice: streamed in blocks of eight bf16 K tiles. Rows
/// past the SBUF budget: the HBM path in blocks of the four row tiles it
/// holds, the last block cut at the slice's end.
#[test]
fn allgather_compute_matmul_streams_what_sbuf_cannot_hold() {
    gather_matmul(256, 4096, 2048, 2, 1, Dtype::Bf16).check(Precision::Hardware);
    gather_matmul(768, 8192, 128, 2, 1, Dtype::F32).check(Precision::Fp32);
}

#[test]
fn allgather_compute_matmul_under_numpy_matches_the_emulator() {
    for c in [
        gather_matmul(256, 512, 512, 4, 2, Dtype::Bf16),
        gather_matmul(128, 256, 128, 4, 1, Dtype::F32),
        GatherMatmul { force_hbm_cc: true, ..gather_matmul(128, 256, 256, 4, 2, Dtype::Bf16) },
    ] {
        c.check_numpy();
    }
}

#[test]
fn allgather_compute_matmul_rules() {
    let ok = AllGatherMatmulShape {
        m: 1024,
        k: 4096,
        k_rhs: 4096,
        n: 1024,
        dtype_bytes: 2,
        tp_degree: 4,
        num_groups: 1,
        lnc: 2,
        nc_version_3: true,
    };
    assert_eq!(allgather_compute_matmul_violation(ok), None);
    let refused = [
        (AllGatherMatmulShape { tp_degree: 3, ..ok }, AllGatherMatmulRule::TpDegree),
        (AllGatherMatmulShape { num_groups: 0, ..ok }, AllGatherMatmulRule::NumGroups),
        (AllGatherMatmulShape { k_rhs: 2048, ..ok }, AllGatherMatmulRule::Contraction),
        (AllGatherMatmulShape { m: 1022, ..ok }, AllGatherMatmulRule::Rows),
        (AllGatherMatmulShape { m: 4 * 200, ..ok }, AllGatherMatmulRule::Tiles),
        (AllGatherMatmulShape { n: 700, ..ok }, AllGatherMatmulRule::Tiles),
        // Streamed (2 · 1536 · 3072 bf16 > 16 MiB): blocks of 8 K tiles do not divide 12.
        (AllGatherMatmulShape { k: 1536, k_rhs: 1536, n: 3072, ..ok }, AllGatherMatmulRule::Blocks),
    ];
    assert_refused_by(allgather_compute_matmul_violation, refused);
    let x = common::tensor(&[256, 256], &[0.0; 256 * 256], Dtype::F32);
    let w = common::tensor(&[128, 128], &[0.0; 128 * 128], Dtype::F32);
    let err =
        Launch::new().ranks(4).run_ranks(|ctx| allgather_compute_matmul::Call::new(&x, &w, 4, 1).run(ctx)).expect_err("K 256 against 128");
    assert!(err.to_string().contains(AllGatherMatmulRule::Contraction.message()), "{err}");
}

/// One SBUF all-gather: each rank's `[rows, w]` input, the replica group's
/// rings, `lnc` programs per rank, the tiled kernel or not.
#[derive(Clone, Debug)]
struct Sb2sb {
    rows: usize,
    w: usize,
    rings: Vec<Vec<i64>>,
    lnc: usize,
    dtype: Dtype,
    tiled: bool,
}

impl Sb2sb {
    fn name(&self) -> String {
        let kernel = if self.tiled { "allgather_sb2sb_tiled" } else { "allgather_sb2sb" };
        format!("{kernel}_{}x{}_rings{:?}_lnc{}_{:?}", self.rows, self.w, self.rings, self.lnc, self.dtype)
    }

    fn ranks(&self) -> usize {
        self.rings.iter().map(Vec::len).sum()
    }

    fn tp(&self) -> usize {
        self.rings[0].len()
    }

    /// Rank `r`'s input, rounded to the dtype.
    fn input(&self, r: usize) -> Vec<f64> {
        common::as_dtype(&common::uniform(self.rows * self.w, common::seed_of(&self.name()) + r as u64, -3.0, 3.0), self.dtype)
    }

    /// What rank `rank` holds: row by row, the rows of its group's members'
    /// inputs side by side in the group's order.
    fn reference(&self, rank: usize) -> Vec<f64> {
        let ring = self.rings.iter().find(|g| g.contains(&(rank as i64))).expect("every rank is in a ring");
        let inputs: Vec<Vec<f64>> = ring.iter().map(|&r| self.input(r as usize)).collect();
        (0..self.rows).flat_map(|i| inputs.iter().flat_map(move |x| x[i * self.w..(i + 1) * self.w].iter().copied())).collect()
    }

    fn run(&self, precision: Precision) -> nki::emulator::RunReport<Tensor> {
        use nkilib::experimental::collectives::sb2sb_allgather::{allgather_sb2sb, allgather_sb2sb_tiled};
        let inputs: Vec<Tensor> = (0..self.ranks()).map(|r| common::tensor(&[self.rows, self.w], &self.input(r), self.dtype)).collect();
        let group = nki::ncc::ReplicaGroup::new(self.rings.clone());
        let tp = self.tp() as i64;
        Launch::new()
            .ranks(self.ranks())
            .lnc(self.lnc)
            .precision(precision)
            .run_all(|ctx| {
                let x = &inputs[ctx.rank()];
                if self.tiled {
                    allgather_sb2sb_tiled::Call::new(x, group.clone(), tp).run(ctx)
                } else {
                    allgather_sb2sb::Call::new(x, group.clone(), tp).run(ctx)
                }
            })
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    /// Results equal to the reference bit for bit (the kernels only move
    /// data); each ring's all-gathers carry its members' whole inputs once per
    /// program that gathers them (a single tile is gathered by every program).
    fn check(&self, precision: Precision) {
        let run = self.run(precision);
        for r in 0..self.ranks() {
            let got = run.results[r][0].to_f32_vec();
            assert_eq!(got.len(), self.tp() * self.rows * self.w, "{}", self.name());
            common::assert_close(&format!("{} rank {r} {precision:?}", self.name()), &got, &self.reference(r), 0.0, 0.0);
        }
        let tiles = if self.tiled { self.rows.div_ceil(128) } else { 1 };
        let gathers_per_program = if tiles == 1 { 1 } else { tiles / self.lnc };
        let copies = if tiles == 1 { self.lnc } else { 1 };
        let tp = self.tp();
        for ring in &self.rings {
            let ring: Vec<usize> = ring.iter().map(|&r| r as usize).collect();
            let events: Vec<_> = run.comm.iter().filter(|c| c.ring == ring).collect();
            assert_eq!(events.len(), gathers_per_program, "{}: one all_gather per tile a program holds", self.name());
            assert!(events.iter().all(|e| e.op == "all_gather"), "{}", self.name());
            let bytes: usize = events.iter().map(|e| e.bytes).sum();
            assert_eq!(bytes, copies * tp * self.rows * self.w * self.dtype.size_bytes(), "{}: bytes gathered", self.name());
            let messages: usize = events.iter().map(|e| e.messages).sum();
            assert_eq!(messages, gathers_per_program * self.lnc * tp * (tp - 1), "{}: every member to every other", self.name());
        }
    }

    /// The emitted kernel under NumPy, given the group as an `ncc.ReplicaGroup`,
    /// against the emulator.
    fn check_numpy(&self) {
        let run = self.run(Precision::Hardware);
        let args: Vec<Vec<Arg>> = (0..self.ranks())
            .map(|r| {
                vec![
                    Arg::Tensor(vec![self.rows, self.w], self.input(r), self.dtype),
                    Arg::ReplicaGroup(self.rings.clone()),
                    Arg::Int(self.tp() as i64),
                ]
            })
            .collect();
        let kernel = if self.tiled { "allgather_sb2sb_tiled" } else { "allgather_sb2sb" };
        assert_numpy_ranks_equal(&self.name(), kernel, &args, self.lnc, &run);
    }
}

fn sb2sb(rows: usize, w: usize, rings: &[&[i64]], lnc: usize, dtype: Dtype, tiled: bool) -> Sb2sb {
    Sb2sb { rows, w, rings: rings.iter().map(|g| g.to_vec()).collect(), lnc, dtype, tiled }
}

/// The docstring's example, `[128, 512]` over four ranks, and smaller
/// tiles over two rings and a group listed out of rank order, LNC 1 and 2,
/// both precision modes.
#[test]
fn allgather_sb2sb_gathers_every_group() {
    let cases = [
        sb2sb(128, 512, &[&[0, 1, 2, 3]], 1, Dtype::Bf16, false),
        sb2sb(64, 96, &[&[0, 1], &[2, 3]], 2, Dtype::F32, false),
        sb2sb(7, 33, &[&[2, 0, 3, 1]], 1, Dtype::F16, false),
    ];
    for c in cases {
        c.check(Precision::Hardware);
        c.check(Precision::Fp32);
    }
}

/// Rows in tiles of 128 split over the LNC programs, a single tile gathered
/// by every program, and a group out of rank order.
#[test]
fn allgather_sb2sb_tiled_gathers_every_tile() {
    let cases = [
        sb2sb(512, 256, &[&[0, 1, 2, 3]], 2, Dtype::Bf16, true),
        sb2sb(384, 128, &[&[0, 1], &[2, 3]], 1, Dtype::F32, true),
        sb2sb(96, 64, &[&[3, 1, 0, 2]], 2, Dtype::F16, true),
    ];
    for c in cases {
        c.check(Precision::Hardware);
        c.check(Precision::Fp32);
    }
}

#[test]
fn allgather_sb2sb_under_numpy_matches_the_emulator() {
    for c in [
        sb2sb(128, 512, &[&[0, 1, 2, 3]], 1, Dtype::Bf16, false),
        sb2sb(64, 96, &[&[0, 1], &[2, 3]], 2, Dtype::F32, false),
        sb2sb(512, 256, &[&[0, 1, 2, 3]], 2, Dtype::Bf16, true),
        sb2sb(96, 64, &[&[3, 1, 0, 2]], 2, Dtype::F16, true),
    ] {
        c.check_numpy();
    }
}

/// The rules as `const fn`s, and the kernels refusing what they break with the
/// same messages.
#[test]
fn allgather_sb2sb_rules() {
    use nkilib::experimental::collectives::sb2sb_allgather::{
        AllGatherSb2sbRule, AllGatherSb2sbShape, allgather_sb2sb, allgather_sb2sb_tiled, allgather_sb2sb_violation,
    };
    let shape = |rows, tiled, lnc| AllGatherSb2sbShape { rows, tiled, lnc };
    assert_eq!(allgather_sb2sb_violation(shape(128, false, 2)), None);
    assert_eq!(allgather_sb2sb_violation(shape(129, false, 1)), Some(AllGatherSb2sbRule::Height));
    assert_eq!(allgather_sb2sb_violation(shape(200, true, 1)), Some(AllGatherSb2sbRule::Rows));
    assert_eq!(allgather_sb2sb_violation(shape(384, true, 2)), Some(AllGatherSb2sbRule::Programs));
    assert_eq!(allgather_sb2sb_violation(shape(100, true, 2)), None);
    assert_eq!(allgather_sb2sb_violation(shape(384, true, 1)), None);
    let group = nki::ncc::ReplicaGroup::new(vec![vec![0, 1]]);
    let refuse = |rows: usize, lnc: usize, tiled: bool| {
        let x = common::tensor(&[rows, 8], &vec![1.0; rows * 8], Dtype::F32);
        let call = |ctx: &nki::Ctx| {
            if tiled {
                allgather_sb2sb_tiled::Call::new(&x, group.clone(), 2).run(ctx)
            } else {
                allgather_sb2sb::Call::new(&x, group.clone(), 2).run(ctx)
            }
        };
        Launch::new().ranks(2).lnc(lnc).run_ranks(call).expect_err("refused").to_string()
    };
    assert!(refuse(129, 1, false).contains(AllGatherSb2sbRule::Height.message()));
    assert!(refuse(200, 1, true).contains(AllGatherSb2sbRule::Rows.message()));
    assert!(refuse(384, 2, true).contains(AllGatherSb2sbRule::Programs.message()));
}

/// One `topk_reduce`: `src_ranks · T` rows of `H` values plus the packed
/// token index, `K` rows per token scattered among padding rows.
#[derive(Clone, Copy, Debug)]
struct TopkReduce {
    lnc: usize,
    src_ranks: usize,
    t: usize,
    k: usize,
    h: usize,
    dtype: Dtype,
}

impl TopkReduce {
    fn name(&self) -> String {
        format!("topk_reduce_lnc{}_r{}_T{}_K{}_H{}_{:?}", self.lnc, self.src_ranks, self.t, self.k, self.h, self.dtype)
    }

    fn rows(&self) -> usize {
        self.src_ranks * self.t
    }

    /// The row each of the `T·K` (token, k) pairs lands on: the first `T·K`
    /// positions of a seeded shuffle of the rows.
    fn placement(&self) -> Vec<usize> {
        let keys = common::uniform(self.rows(), common::seed_of(&self.name()) + 1, 0.0, 1.0);
        let mut order: Vec<usize> = (0..self.rows()).collect();
        order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]));
        order.truncate(self.t * self.k);
        order
    }

    /// The input, as values of the dtype: padding rows hold -1 everywhere
    /// (their packed index is negative), row `placement[t·K + k]` holds
    /// token `t`'s values and `t` as an int32 whose low 16 bits are column
    /// `H` (the 16-bit pattern `t`, a subnormal) and high bits column `H + 1`.
    fn input(&self) -> Vec<f64> {
        let width = self.h + 2;
        let mut x = vec![-1.0; self.rows() * width];
        let values = common::as_dtype(&common::uniform(self.t * self.k * self.h, common::seed_of(&self.name()), -2.0, 2.0), self.dtype);
        let tiny = if self.dtype == Dtype::Bf16 { (-133f64).exp2() } else { (-24f64).exp2() };
        for (j, &row) in self.placement().iter().enumerate() {
            let at = row * width;
            x[at..at + self.h].copy_from_slice(&values[j * self.h..(j + 1) * self.h]);
            x[at + self.h] = (j / self.k) as f64 * tiny;
            x[at + self.h + 1] = 0.0;
        }
        x
    }

    /// Token `t`'s output row: the sum of its `K` rows' values, in float64.
    fn reference(&self) -> Vec<f64> {
        let (x, width) = (self.input(), self.h + 2);
        let mut out = vec![0.0; self.t * self.h];
        for (j, &row) in self.placement().iter().enumerate() {
            let t = j / self.k;
            for c in 0..self.h {
                out[t * self.h + c] += x[row * width + c];
            }
        }
        out
    }

    fn run(&self, precision: Precision) -> Tensor {
        use nkilib::experimental::collectives::topk_reduce::topk_reduce;
        let x = common::tensor(&[self.rows(), self.h + 2], &self.input(), self.dtype);
        topk_reduce::Call::new(&x, self.t as i64, self.k as i64)
            .launch(&Launch::new().lnc(self.lnc).precision(precision))
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    /// The sums within the library test's tolerance (they accumulate in the
    /// input's dtype).
    fn check(&self, precision: Precision) {
        let got = self.run(precision).to_f32_vec();
        common::assert_close(&format!("{} {precision:?}", self.name()), &got, &self.reference(), 5e-2, 5e-2);
    }

    fn check_numpy(&self) {
        let got = self.run(Precision::Hardware).to_f32_vec();
        let args = [Arg::Tensor(vec![self.rows(), self.h + 2], self.input(), self.dtype), Arg::Int(self.t as i64), Arg::Int(self.k as i64)];
        let np = common::run_numpy("topk_reduce", &args, self.lnc, "hardware");
        assert_eq!(np[0], got, "{}: numpy", self.name());
    }
}

const fn topk_reduce_case(lnc: usize, src_ranks: usize, t: usize, k: usize, h: usize) -> TopkReduce {
    TopkReduce { lnc, src_ranks, t, k, h, dtype: Dtype::Bf16 }
}

/// The library test's configurations (bf16) but its two largest (128 source
/// ranks of 128 tokens, which the library comparison covers), and fp16.
#[test]
fn topk_reduce_matches_the_library_test() {
    let cases = [
        topk_reduce_case(1, 8, 4, 4, 2880),
        topk_reduce_case(2, 8, 4, 4, 2880),
        topk_reduce_case(2, 8, 4, 8, 4096),
        topk_reduce_case(2, 8, 128, 4, 2880),
        topk_reduce_case(2, 8, 128, 8, 4096),
        topk_reduce_case(2, 128, 4, 4, 2880),
        topk_reduce_case(2, 128, 4, 8, 4096),
        TopkReduce { dtype: Dtype::F16, ..topk_reduce_case(2, 8, 40, 3, 256) },
    ];
    for c in cases {
        c.check(Precision::Hardware);
        c.check(Precision::Fp32);
    }
}

#[test]
fn topk_reduce_under_numpy_matches_the_emulator() {
    for c in [
        topk_reduce_case(1, 8, 4, 4, 2880),
        topk_reduce_case(2, 8, 128, 8, 512),
        TopkReduce { dtype: Dtype::F16, ..topk_reduce_case(2, 4, 33, 2, 64) },
    ] {
        c.check_numpy();
    }
}

#[test]
fn topk_reduce_rules() {
    use nkilib::experimental::collectives::topk_reduce::{TopkReduceRule, TopkReduceShape, topk_reduce, topk_reduce_violation};
    let shape = |t, k, h, lnc| TopkReduceShape { t, k, h, lnc };
    assert_eq!(topk_reduce_violation(shape(128, 8, 4096, 2)), None);
    assert_eq!(topk_reduce_violation(shape(129, 8, 4096, 2)), Some(TopkReduceRule::Tokens));
    assert_eq!(topk_reduce_violation(shape(4, 9, 4096, 2)), Some(TopkReduceRule::Experts));
    assert_eq!(topk_reduce_violation(shape(4, 4, 2881, 2)), Some(TopkReduceRule::Hidden));
    assert_eq!(topk_reduce_violation(shape(4, 4, 2881, 1)), Some(TopkReduceRule::PackedIndex));
    let refuse = |rows: usize, width: usize, t: i64, k: i64, lnc: usize| {
        let x = common::tensor(&[rows, width], &vec![-1.0; rows * width], Dtype::Bf16);
        topk_reduce::Call::new(&x, t, k).launch(&Launch::new().lnc(lnc)).expect_err("refused").to_string()
    };
    assert!(refuse(1032, 66, 129, 4, 2).contains(TopkReduceRule::Tokens.message()));
    assert!(refuse(64, 66, 4, 9, 2).contains(TopkReduceRule::Experts.message()));
    assert!(refuse(64, 65, 4, 4, 2).contains(TopkReduceRule::Hidden.message()));
    assert!(refuse(64, 65, 4, 4, 1).contains(TopkReduceRule::PackedIndex.message()));
    let x = common::tensor(&[8, 66], &[0.0; 8 * 66], Dtype::F32);
    let e = topk_reduce::Call::new(&x, 4, 2).launch(&Launch::new()).expect_err("float32 is refused").to_string();
    assert!(e.contains("topk_reduce takes input as bfloat16 or float16"), "{e}");
}
