//! The multi-program emulator: launch validation, results per rank and program,
//! `core_barrier`, failure propagation between programs, and detection of
//! mismatched or missing collectives and deadlocks instead of hangs.

use crate::common::*;
use nki_core::collectives::{PermuteOpts, ReplicaGroup, collective_permute_implicit, collective_permute_implicit_reduce};
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, CoreBarrierOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, NkiError, Origin, Precision, Result, Tensor, nl, s};

fn barrier(ctx: &Ctx, data: &Tensor) -> Result<()> {
    nisa::core_barrier(ctx, data, &[0, 1], CoreBarrierOpts::default())
}

fn ring(ranks: &[i64]) -> ReplicaGroup {
    ReplicaGroup::new(vec![ranks.to_vec()])
}

fn permute(ctx: &Ctx, t: &Tensor, g: &ReplicaGroup) -> Result<()> {
    collective_permute_implicit(ctx, &[vec![t.clone()]], &[vec![t.clone()]], g, PermuteOpts::default())
}

#[test]
fn launch_validation() {
    let e = expect_err(Launch::new().lnc(2).generation(Generation::Trn1).run(|_| Ok(())));
    assert_err(&e, ErrorKind::Argument, &["lnc = 2", "trn2 or later"]);
    let e = expect_err(Launch::new().grid(Some(3)).run(|_| Ok(())));
    assert_err(&e, ErrorKind::Argument, &["lnc = 3"]);
    let e = expect_err(Launch::new().ranks(0).run(|_| Ok(())));
    assert_err(&e, ErrorKind::Argument, &["ranks = 0"]);
    let e = expect_err(Launch::new().ranks(65).run(|_| Ok(())));
    assert_err(&e, ErrorKind::Argument, &["ranks = 65"]);
    let l = Launch::new().lnc(2).ranks(3).precision(Precision::Fp32).generation(Generation::Trn3);
    assert_eq!((l.programs(), l.lnc_degree(), l.num_ranks()), (2, 2, 3));
    assert_eq!((l.precision_model(), l.hardware()), (Precision::Fp32, Generation::Trn3));
    assert_eq!(Launch::new().lnc(1).programs(), 1);
}

#[test]
fn results_are_reported_per_rank_and_program() {
    let launch = Launch::new().lnc(2).ranks(3).precision(Precision::Fp32).generation(Generation::Trn3);
    let report = with_timeout(30, move || {
        launch
            .run_all(|ctx| {
                assert_eq!((ctx.num_ranks(), ctx.num_programs(), ctx.program_ndim()), (3, 2, 1));
                assert_eq!((ctx.precision(), ctx.generation(), ctx.rounds()), (Precision::Fp32, Generation::Trn3, false));
                Ok(10 * ctx.rank() + ctx.program_id())
            })
            .unwrap()
    });
    assert_eq!(report.results, vec![vec![0, 1], vec![10, 11], vec![20, 21]]);
    assert_eq!(report.ops, vec![vec![0, 0]; 3]);
    let per_rank = with_timeout(30, || Launch::new().lnc(2).ranks(2).run_ranks(|ctx| Ok((ctx.rank(), ctx.program_id()))).unwrap());
    assert_eq!(per_rank, vec![(0, 0), (1, 0)]);
    let first = Launch::new().ranks(2).run(|ctx| Ok(ctx.rank() + 5)).unwrap();
    assert_eq!(first, 5);
}

#[test]
fn core_barrier_orders_the_two_programs() {
    // Ping-pong through one shared cell: each round one program writes, the
    // other reads after the barrier.
    let got = with_timeout(30, || {
        Launch::new()
            .lnc(2)
            .run_all(|ctx| {
                let cell = alloc(ctx, &[1, 1], Dtype::F32, Buffer::SharedHbm)?;
                let mut seen = Vec::new();
                for k in 0..20 {
                    if k % 2 == ctx.program_id() {
                        cell.fill_from_f32(&[k as f32])?;
                    }
                    barrier(ctx, &cell)?;
                    seen.push(cell.to_f32_vec()[0]);
                    barrier(ctx, &cell)?;
                }
                Ok(seen)
            })
            .unwrap()
    });
    let want: Vec<f32> = (0..20).map(|k| k as f32).collect();
    assert_eq!(got.results[0], vec![want.clone(), want]);
}

#[test]
fn core_barrier_rules() {
    let e = expect_err(Launch::new().run(|ctx| barrier(ctx, &alloc(ctx, &[1], Dtype::F32, Buffer::SharedHbm)?)));
    assert_err(&e, ErrorKind::Constraint, &["nisa.core_barrier", "LNC2"]);
    let e =
        expect_err(Launch::new().generation(Generation::Trn1).run(|ctx| barrier(ctx, &alloc(ctx, &[1], Dtype::F32, Buffer::SharedHbm)?)));
    assert_err(&e, ErrorKind::Constraint, &["trn2 or later", "trn1"]);
    let e = expect_err(with_timeout(30, || {
        Launch::new()
            .lnc(2)
            .run(|ctx| nisa::core_barrier(ctx, &alloc(ctx, &[1], Dtype::F32, Buffer::SharedHbm)?, &[0, 2], Default::default()))
    }));
    assert_err(&e, ErrorKind::Constraint, &["cores must be (0, 1)", "[0, 2]"]);
    for buffer in [Buffer::Psum, Buffer::PrivateHbm] {
        let e = expect_err(with_timeout(30, move || {
            Launch::new().lnc(2).run(move |ctx| barrier(ctx, &alloc(ctx, &[1, 1], Dtype::F32, buffer)?))
        }));
        assert_err(&e, ErrorKind::Constraint, &["must be a shared_hbm tensor or an SBUF tile"]);
    }
    // An SBUF tile each program keeps for itself: the barrier only synchronises.
    let got = with_timeout(30, || {
        Launch::new()
            .lnc(2)
            .run(|ctx| {
                let counter = alloc(ctx, &[1, 1], Dtype::F32, Buffer::Sbuf)?;
                counter.fill_from_f32(&[ctx.program_id() as f32])?;
                barrier(ctx, &counter)?;
                Ok(counter.to_f32_vec()[0])
            })
            .unwrap()
    });
    assert_eq!(got, 0.0);
}

#[test]
fn a_program_that_skips_a_barrier_is_an_error_not_a_hang() {
    let e = expect_err(with_timeout(30, || {
        Launch::new().lnc(2).run(|ctx| {
            let t = alloc(ctx, &[1], Dtype::F32, Buffer::SharedHbm)?;
            barrier(ctx, &t)?;
            if ctx.program_id() == 0 {
                barrier(ctx, &t)?;
            }
            Ok(())
        })
    }));
    assert_err(&e, ErrorKind::Collective, &["rank 0 program 1 finished without joining core_barrier"]);
}

/// Asserts that `e` is the root-cause error raised on `rank` (program 0), tagged with it.
fn assert_root_error(e: &NkiError, rank: usize, text: &str) {
    assert_eq!(e.origin, Some(Origin { rank, program: 0 }), "{e}");
    assert!(e.to_string().starts_with(&format!("[rank {rank} program 0] ")), "{e}");
    assert!(e.to_string().contains(text), "{e}");
    assert_ne!(e.kind, ErrorKind::Aborted);
}

#[test]
fn an_error_on_one_rank_stops_ranks_that_are_computing() {
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(3).run(|ctx| {
            let t = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
            if ctx.rank() == 1 {
                // A failing op: a moving operand in HBM.
                let ps = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Psum)?;
                return nisa::nc_matmul(ctx, &ps, &t, &Tensor::zeros(&[2, 2], Dtype::F32)?, Default::default());
            }
            // Would run forever unless the failure stops it.
            loop {
                nisa::memset(ctx, &t, 1.0, Default::default())?;
            }
        })
    }));
    assert_root_error(&e, 1, "nisa.nc_matmul");
    assert_eq!(e.kind, ErrorKind::Constraint);
}

#[test]
fn an_error_on_one_rank_releases_ranks_waiting_in_a_collective() {
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(4).lnc(2).run(|ctx| {
            let t = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            if ctx.rank() == 2 && ctx.program_id() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                return Err(NkiError::new(ErrorKind::Assertion, "kernel assert failed on purpose"));
            }
            permute(ctx, &t, &ring(&[0, 1, 2, 3]))
        })
    }));
    assert_root_error(&e, 2, "kernel assert failed on purpose");
    assert_eq!(e.kind, ErrorKind::Assertion);
}

#[test]
fn mismatched_collectives_are_reported() {
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(2).run(|ctx| {
            let t = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            let g = ring(&[0, 1]);
            if ctx.rank() == 0 {
                permute(ctx, &t, &g)
            } else {
                collective_permute_implicit_reduce(
                    ctx,
                    &[vec![t.clone()]],
                    &[vec![t.clone()]],
                    &[vec![t.clone()]],
                    &g,
                    nl::add,
                    PermuteOpts::default(),
                )
            }
        })
    }));
    assert_err(&e, ErrorKind::Collective, &["issued collective_permute_implicit", "where its partners issued", "same order"]);
}

#[test]
fn programs_waiting_on_different_rendezvous_are_a_deadlock() {
    // Rank 0 joins ring (0, 1), rank 1 joins ring (1, 0): different collectives.
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(2).run(|ctx| {
            let t = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            let g = if ctx.rank() == 0 { ring(&[0, 1]) } else { ring(&[1, 0]) };
            permute(ctx, &t, &g)
        })
    }));
    assert_err(&e, ErrorKind::Collective, &["deadlock", "rank 0 program 0 waits in collective_permute_implicit", "rank 1 program 0 waits"]);
    // A barrier on one core while the other core waits in a collective.
    let e = expect_err(with_timeout(30, || {
        Launch::new().lnc(2).run(|ctx| {
            let t = alloc(ctx, &[1, 4], Dtype::F32, Buffer::SharedHbm)?;
            if ctx.program_id() == 0 { barrier(ctx, &t) } else { permute(ctx, &t, &ring(&[0])) }
        })
    }));
    assert_err(&e, ErrorKind::Collective, &["deadlock", "core_barrier", "collective_permute_implicit"]);
}

#[test]
fn a_rank_that_never_joins_is_reported() {
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(3).run(|ctx| {
            let t = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            if ctx.rank() == 1 {
                return Ok(());
            }
            permute(ctx, &t, &ring(&[0, 1, 2]))
        })
    }));
    assert_err(&e, ErrorKind::Collective, &["rank 1 program 0 finished without joining collective_permute_implicit"]);
}

#[test]
fn panics_inside_programs_become_errors() {
    let e = expect_err(Launch::new().run(|ctx| -> Result<()> {
        let t = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
        let v = t.index(&s![0])?.to_f32_vec();
        panic!("index {} of {} values", 7, v.len());
    }));
    assert_err(&e, ErrorKind::Constraint, &["internal error (panic)", "index 7 of 2 values"]);
    assert_eq!(e.origin, None);
    // On one rank of several: tagged with the rank, and the others are released.
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(3).run(|ctx| {
            let t = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            if ctx.rank() == 2 {
                std::panic::panic_any(42u8);
            }
            permute(ctx, &t, &ring(&[0, 1, 2]))
        })
    }));
    assert_root_error(&e, 2, "internal error (panic)");
}

#[test]
fn collectives_after_a_successful_run_leave_no_state_behind() {
    // Many back-to-back collectives and barriers on two independent rings.
    let report = with_timeout(30, || {
        Launch::new()
            .ranks(4)
            .lnc(2)
            .run_all(|ctx| {
                let g = ReplicaGroup::new(vec![vec![0, 2], vec![1, 3]]);
                let t = alloc(ctx, &[1, 2], Dtype::F32, Buffer::SharedHbm)?;
                t.index(&s![.., ctx.program_id()])?.fill_from_f32(&[ctx.rank() as f32])?;
                barrier(ctx, &t)?;
                for _ in 0..25 {
                    permute(ctx, &t, &g)?;
                    barrier(ctx, &t)?;
                }
                Ok(t.to_f32_vec())
            })
            .unwrap()
    });
    // An odd number of swaps inside each pair leaves the partner's data.
    for (r, partner) in [(0, 2.0), (1, 3.0), (2, 0.0), (3, 1.0)] {
        assert_eq!(report.results[r], vec![vec![partner, partner]; 2], "rank {r}");
    }
    assert_eq!(report.comm.len(), 50);
}
