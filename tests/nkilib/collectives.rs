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

use crate::common::{self, Arg, emitted_package};
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
        let np = common::run_numpy_ranks(emitted_package(), "fine_grained_allgather", &args, self.lnc, "hardware");
        for (r, outs) in np.iter().enumerate() {
            assert_eq!(outs[0], run.results[r][0].to_f32_vec(), "{}: numpy rank {r}", self.name());
        }
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
    for (shape, rule) in refused {
        assert_eq!(fine_grained_allgather_violation(shape), Some(rule), "{shape:?}");
    }
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
        let rhs = self.rhs(rank);
        let mut out = vec![0.0; self.tp * self.m * self.n];
        for (row, out_row) in gathered.chunks(self.k).zip(out.chunks_mut(self.n)) {
            for (a, rhs_row) in row.iter().zip(rhs.chunks(self.n)) {
                for (o, b) in out_row.iter_mut().zip(rhs_row) {
                    *o += a * b;
                }
            }
        }
        out
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
        let np = common::run_numpy_ranks(emitted_package(), "allgather_compute_matmul", &args, self.lnc, "hardware");
        for (r, outs) in np.iter().enumerate() {
            assert_eq!(outs[0], run.results[r][0].to_f32_vec(), "{}: numpy rank {r}", self.name());
        }
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
    for (shape, rule) in refused {
        assert_eq!(allgather_compute_matmul_violation(shape), Some(rule), "{shape:?}");
    }
    let x = common::tensor(&[256, 256], &[0.0; 256 * 256], Dtype::F32);
    let w = common::tensor(&[128, 128], &[0.0; 128 * 128], Dtype::F32);
    let err =
        Launch::new().ranks(4).run_ranks(|ctx| allgather_compute_matmul::Call::new(&x, &w, 4, 1).run(ctx)).expect_err("K 256 against 128");
    assert!(err.to_string().contains(AllGatherMatmulRule::Contraction.message()), "{err}");
}
