//! Bounded launches of DSL kernels: ranks and LNC2 programs stuck in an enormous
//! loop of small ops, in a loop without any op, or at a core barrier their
//! partner never reaches stop once `Launch::timeout` passes, and the `Timeout`
//! error names each program's op, loop or wait with its kernel file:line. A launch
//! that finishes in time returns the same result as an unbounded one.

use nki::prelude::*;
use nki::{ErrorKind, NkiError};
use std::time::{Duration, Instant};

/// Adds 1 to every element of `x`, `n` times.
#[nki_kernel]
pub fn count_up(x: Hbm, n: i64) -> Hbm {
    let [p, m] = x.shape();
    let t = nl::ndarray([p, m], x.dtype());
    nisa::dma_copy(t, x);
    for i in 0..n {
        nisa::tensor_scalar(t, t, nl::add, 1.0); // count-op
    }
    let out = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, t);
    out
}

/// Copies `x` after counting to `n * n` without any op.
#[nki_kernel]
pub fn idle(x: Hbm, n: i64) -> Hbm {
    let [p, m] = x.shape();
    let t = nl::ndarray([p, m], x.dtype());
    nisa::dma_copy(t, x);
    let mut k = 0;
    for i in 0..n {
        for j in 0..n {
            k += 1; // idle-loop
        }
    }
    let out = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, t);
    out
}

/// Program 0 of each rank counts `n` times before the core barrier; program 1 goes
/// straight there.
#[nki_kernel]
pub fn stall(x: Hbm, n: i64) -> Hbm {
    let [p, m] = x.shape();
    let out = nl::ndarray([p, m], x.dtype(), buffer = nl::shared_hbm);
    let t = nl::ndarray([p, m], x.dtype());
    nisa::dma_copy(t, x);
    if nl::program_id(0) == 0 {
        for i in 0..n {
            nisa::tensor_scalar(t, t, nl::add, 1.0); // stall-op
        }
        nisa::dma_copy(out, t);
    }
    nisa::core_barrier(out, [0, 1]); // stall-barrier
    out
}

const LIMIT: Duration = Duration::from_millis(500);
const FOREVER: i64 = 1 << 40;

/// `file:line` of the kernel line of this file that ends with the comment `marker`.
fn at(marker: &str) -> String {
    let line = include_str!("launch_timeout.rs")
        .lines()
        .position(|l| l.trim_end().ends_with(&format!("// {marker}")))
        .unwrap_or_else(|| panic!("no line ends with // {marker}"));
    format!("{}:{}", file!(), line + 1)
}

fn input() -> Tensor {
    Tensor::from_f32(&[128, 4], &[0.5; 512], Dtype::F32).unwrap()
}

/// Launches `f` on every program under the limit; the error and how long it took.
fn bounded(launch: Launch, f: impl Fn(&Ctx) -> nki::Result<Tensor> + Sync) -> (NkiError, Duration) {
    let start = Instant::now();
    let e = launch.timeout(LIMIT).run_all(f).expect_err("the kernel cannot finish in time");
    let elapsed = start.elapsed();
    assert!(elapsed >= LIMIT && elapsed < 5 * LIMIT, "the launch took {elapsed:?} with a {LIMIT:?} limit");
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    (e, elapsed)
}

fn assert_names(e: &NkiError, states: &[String]) {
    assert!(e.message.starts_with("the launch did not finish within 500ms; each program at the deadline: "), "{e}");
    for s in states {
        assert!(e.message.contains(s.as_str()), "{s:?} missing from: {e}");
    }
}

#[test]
fn ranks_and_lnc2_programs_in_an_endless_loop_of_ops_stop_at_the_deadline() {
    let x = input();
    let (e, _) = bounded(Launch::new().ranks(4).lnc(2), |ctx| count_up::Call::new(&x, FOREVER).run(ctx));
    let op = at("count-op");
    let states: Vec<String> = (0..4)
        .flat_map(|r| (0..2).map(move |p| (r, p)))
        .map(|(r, p)| format!("[rank {r} program {p}] nisa.tensor_scalar ({op}): stopped at this op"))
        .collect();
    assert_names(&e, &states);
}

#[test]
fn a_loop_without_ops_stops_at_its_next_iteration() {
    let x = input();
    let (e, _) = bounded(Launch::new().ranks(2), |ctx| idle::Call::new(&x, FOREVER).run(ctx));
    // The innermost loop's check fires; the last op was the load.
    let states: Vec<String> = (0..2)
        .map(|r| {
            let line = at("idle-loop").rsplit(':').next().unwrap().parse::<usize>().unwrap() - 1;
            format!("[rank {r} program 0] {}:{line}: stopped in this loop (last op nisa.dma_copy)", file!())
        })
        .collect();
    assert_names(&e, &states);
}

#[test]
fn a_program_at_a_barrier_its_partner_never_reaches_reports_the_wait() {
    let x = input();
    let (e, _) = bounded(Launch::new().ranks(2).lnc(2), |ctx| stall::Call::new(&x, FOREVER).run(ctx));
    let (op, barrier) = (at("stall-op"), at("stall-barrier"));
    let states: Vec<String> = (0..2)
        .flat_map(|r| {
            [
                format!("[rank {r} program 0] nisa.tensor_scalar ({op}): stopped at this op"),
                format!("[rank {r} program 1] nisa.core_barrier ({barrier}): waiting in core_barrier for rank {r} program 0"),
            ]
        })
        .collect();
    assert_names(&e, &states);
}

#[test]
fn kernels_that_finish_in_time_are_unaffected() {
    let x = input();
    let launch = Launch::new().ranks(2).lnc(2);
    let plain = launch.run_ranks(|ctx| count_up::Call::new(&x, 7).run(ctx)).unwrap();
    let start = Instant::now();
    let timed = launch.clone().timeout(Duration::from_secs(60)).run_ranks(|ctx| count_up::Call::new(&x, 7).run(ctx)).unwrap();
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    for (a, b) in plain.iter().zip(&timed) {
        assert_eq!(b.to_f32_vec(), vec![7.5f32; 512]);
        assert_eq!(a.to_f32_vec(), b.to_f32_vec());
    }
    let idled = launch.timeout(Duration::from_secs(60)).run(|ctx| idle::Call::new(&x, 30).run(ctx)).unwrap();
    assert_eq!(idled.to_f32_vec(), vec![0.5f32; 512]);
}
