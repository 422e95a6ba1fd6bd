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

use crate::common::{self, Arg, emitted_package};
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::experimental::collectives::fg_allgather::{
    FineGrainedAllGatherRule, FineGrainedAllGatherShape, channel_count, fine_grained_allgather, fine_grained_allgather_violation,
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
    assert!(err.to_string().contains("scalar_offset 4"), "{err}");
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
