//! Bounded launches (`Launch::timeout`): programs busy with endless ops on several
//! ranks and LNC2, and programs waiting for a busy partner, stop once the limit
//! passes, and the launch fails with a `Timeout` error naming each program's
//! state; a launch that finishes in time is unaffected, and a failure before the
//! deadline is still reported as itself.

mod common;

use common::*;
use nki_core::collectives::{PermuteOpts, ReplicaGroup, collective_permute_implicit};
use nki_core::isa::{self as nisa, CoreBarrierOpts, EngineOpts};
use nki_core::nl::{self, NdarrayOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, NkiError, Result};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_millis(500);

/// Runs `launch` on `f` under a hang guard; returns its error and how long it took.
fn timed_out(launch: Launch, f: impl Fn(&Ctx) -> Result<()> + Sync + Send + 'static) -> (NkiError, Duration) {
    with_timeout(60, move || {
        let start = Instant::now();
        let e = launch.run_all(f).expect_err("the launch cannot finish");
        (e, start.elapsed())
    })
}

/// The launch ended after its limit, and within a small multiple of it.
fn assert_prompt(elapsed: Duration) {
    assert!(elapsed >= LIMIT && elapsed < 5 * LIMIT, "the launch took {elapsed:?} with a {LIMIT:?} limit");
}

/// Memsets a small SBUF tile forever.
fn spin(ctx: &Ctx) -> Result<()> {
    let t = alloc(ctx, &[128, 4], Dtype::F32, Buffer::Sbuf)?;
    loop {
        nisa::memset(ctx, &t, 1.0, EngineOpts::default())?;
    }
}

#[test]
fn endless_ops_on_every_rank_and_program_stop_at_the_deadline() {
    let (e, elapsed) = timed_out(Launch::new().ranks(3).lnc(2).timeout(LIMIT), spin);
    assert_prompt(elapsed);
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert_eq!(e.origin, None, "the error concerns the whole launch: {e}");
    assert!(e.message.starts_with("the launch did not finish within 500ms; each program at the deadline: "), "{e}");
    for r in 0..3 {
        for p in 0..2 {
            let state = format!("[rank {r} program {p}] nisa.memset: stopped at this op");
            assert!(e.message.contains(&state), "{state:?} missing from: {e}");
        }
    }
}

#[test]
fn a_program_waiting_for_a_busy_partner_reports_whom_it_waits_for() {
    // Rank 1 joins a permute over ranks 0 and 1 while rank 0 never stops computing.
    let launch = Launch::new().ranks(2).timeout(LIMIT);
    let (e, elapsed) = timed_out(launch, |ctx| {
        if ctx.rank() == 0 {
            return spin(ctx);
        }
        let (src, dst) = (alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?, alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?);
        collective_permute_implicit(ctx, &[vec![src]], &[vec![dst]], &ReplicaGroup::new(vec![vec![0, 1]]), PermuteOpts::default())
    });
    assert_prompt(elapsed);
    assert_err(
        &e,
        ErrorKind::Timeout,
        &[
            "[rank 0 program 0] nisa.memset: stopped at this op",
            "[rank 1 program 0] collective_permute_implicit: waiting in collective_permute_implicit for rank 0 program 0",
        ],
    );

    // LNC2: program 1 reaches a core barrier that program 0 never reaches.
    let launch = Launch::new().lnc(2).timeout(LIMIT);
    let (e, elapsed) = timed_out(launch, |ctx| {
        let flag = nl::ndarray(ctx, &[1, 1], Dtype::F32, NdarrayOpts { buffer: Some(Buffer::SharedHbm), ..Default::default() })?;
        if ctx.program_id() == 0 {
            return spin(ctx);
        }
        nisa::core_barrier(ctx, &flag, &[0, 1], CoreBarrierOpts::default())
    });
    assert_prompt(elapsed);
    assert_err(
        &e,
        ErrorKind::Timeout,
        &[
            "[rank 0 program 0] nisa.memset: stopped at this op",
            "[rank 0 program 1] nisa.core_barrier: waiting in core_barrier for rank 0 program 0",
        ],
    );
}

#[test]
fn programs_that_finished_are_reported_as_finished() {
    let (e, elapsed) = timed_out(Launch::new().ranks(2).timeout(LIMIT), |ctx| if ctx.rank() == 1 { spin(ctx) } else { Ok(()) });
    assert_prompt(elapsed);
    assert_err(&e, ErrorKind::Timeout, &["[rank 0 program 0] finished", "[rank 1 program 0] nisa.memset: stopped at this op"]);
}

/// Sums `n` rows of ones per program through a chain of small ops.
fn count(ctx: &Ctx, n: usize) -> Result<Vec<f32>> {
    let acc = sbuf_with(ctx, &[4, 1], Dtype::F32, &[0.0; 4])?;
    let one = sbuf_with(ctx, &[4, 1], Dtype::F32, &[1.0; 4])?;
    for _ in 0..n {
        nisa::tensor_tensor(ctx, &acc, &acc, &one, nl::add, EngineOpts::default())?;
    }
    Ok(acc.to_f32_vec())
}

#[test]
fn a_launch_that_finishes_in_time_is_unaffected() {
    let plain = Launch::new().ranks(2).lnc(2);
    let bounded = plain.clone().timeout(Duration::from_secs(60));
    let want = plain.run_all(|ctx| count(ctx, 100 + ctx.rank())).unwrap();
    let start = Instant::now();
    let got = bounded.run_all(|ctx| count(ctx, 100 + ctx.rank())).unwrap();
    // The watchdog does not hold the launch until its limit.
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert_eq!(got.results, vec![vec![vec![100.0f32; 4]; 2], vec![vec![101.0f32; 4]; 2]]);
    assert_eq!((got.results, got.ops, got.memory), (want.results, want.ops, want.memory));
}

#[test]
fn a_failure_before_the_deadline_is_reported_as_itself() {
    let start = Instant::now();
    let e = with_timeout(60, || {
        Launch::new()
            .ranks(2)
            .timeout(Duration::from_secs(30))
            .run_all(|ctx| if ctx.rank() == 0 { alloc(ctx, &[129, 1], Dtype::F32, Buffer::Sbuf).map(drop) } else { spin(ctx) })
            .unwrap_err()
    });
    assert!(start.elapsed() < Duration::from_secs(10), "the busy rank did not stop at its next op");
    assert_err(&e, ErrorKind::Constraint, &["[rank 0 program 0] nl.ndarray", "partition dim 129"]);
}

#[test]
fn a_zero_time_limit_is_an_argument_error() {
    let e = Launch::new().timeout(Duration::ZERO).run(|_| Ok(())).unwrap_err();
    assert_err(&e, ErrorKind::Argument, &["invalid timeout = 0s", "longer than zero"]);
}
