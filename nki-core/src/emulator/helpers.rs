//! Helper threads that split one large instruction's work with the program
//! running it.
//!
//! A launch runs one thread per LNC program and rank; when the machine has more
//! cores than that, each program may borrow `helpers` extra threads
//! ([`Launch::threads`](super::Launch::threads)) for instructions whose work
//! falls into independent parts — a matmul's column blocks, an activation's
//! partition rows. The parts are fixed by the instruction (never by how many
//! threads take part), each part writes only its own outputs, and every part is
//! computed exactly as it would be sequentially, so results are bit-identical
//! whatever the thread count.
//!
//! The helpers are a process-wide pool of parked threads, started on first
//! demand and reused by every later launch: an idle helper waits on its channel,
//! so a split costs a wake-up rather than a thread start.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The threads a launch may keep busy, shared by its running programs: each
/// runs on its own thread and may split a large instruction over its share of
/// the rest. The share is recomputed as programs finish, so the core of a
/// program that is done goes to those still running (an imbalanced tail, a
/// program slowed by page faults) instead of idling; running programs and
/// their helpers never exceed the budget.
#[derive(Debug)]
pub(crate) struct ThreadBudget {
    threads: usize,
    running: AtomicUsize,
}

impl ThreadBudget {
    /// A budget of `threads` for `programs` programs, all running.
    pub(crate) fn new(threads: usize, programs: usize) -> ThreadBudget {
        ThreadBudget { threads, running: AtomicUsize::new(programs) }
    }

    /// Helper threads each running program may use now.
    pub(crate) fn helpers(&self) -> usize {
        (self.threads / self.running.load(Ordering::Relaxed).max(1)).saturating_sub(1)
    }

    /// One program is done: its share goes to the others.
    pub(crate) fn finished(&self) {
        // Saturating: a program reporting twice must not wrap the count.
        let _ = self.running.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// Work handed to a helper: it runs, then the helper returns itself to the idle
/// list, then it signals the caller (so the caller's next split finds it idle).
struct Job {
    work: Box<dyn FnOnce() + Send + 'static>,
    done: Arc<Latch>,
}

/// Counts the helpers still working on one split.
#[derive(Default)]
struct Latch {
    left: Mutex<usize>,
    zero: Condvar,
    panicked: AtomicBool,
}

impl Latch {
    fn add(&self) {
        *self.left.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    fn count_down(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        *left -= 1;
        if *left == 0 {
            self.zero.notify_all();
        }
    }

    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        while *left > 0 {
            left = self.zero.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Waits for the split's helpers when dropped, also while unwinding from a panic
/// of the caller's own share, so no helper outlives the data it borrows.
struct WaitOnDrop<'a>(&'a Latch);

impl Drop for WaitOnDrop<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

/// Parked helpers, each reached through its channel.
static IDLE: Mutex<Vec<Sender<Job>>> = Mutex::new(Vec::new());

/// An idle helper, or a new one (None if the OS refuses a thread: the caller
/// then does that share itself).
fn helper() -> Option<Sender<Job>> {
    if let Some(tx) = IDLE.lock().unwrap_or_else(PoisonError::into_inner).pop() {
        return Some(tx);
    }
    let (tx, rx) = mpsc::channel::<Job>();
    let me = tx.clone();
    std::thread::Builder::new()
        .name("nki-helper".to_string())
        .spawn(move || {
            for job in rx {
                if catch_unwind(AssertUnwindSafe(job.work)).is_err() {
                    job.done.panicked.store(true, Ordering::Relaxed);
                }
                IDLE.lock().unwrap_or_else(PoisonError::into_inner).push(me.clone());
                job.done.count_down();
            }
        })
        .ok()?;
    Some(tx)
}

/// Runs `part(i)` for every `i` in `0..parts`, on the calling thread and up to
/// `helpers` helper threads, and returns when all parts are done. Parts are
/// handed out in order to whichever thread is free; each must write only its own
/// outputs. A panic in any part panics here once every part has stopped.
pub(crate) fn split(helpers: usize, parts: usize, part: &(dyn Fn(usize) + Sync)) {
    let helpers = helpers.min(parts.saturating_sub(1));
    if helpers == 0 {
        (0..parts).for_each(part);
        return;
    }
    let next = AtomicUsize::new(0);
    let share = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= parts {
                break;
            }
            part(i);
        }
    };
    let done = Arc::new(Latch::default());
    {
        let _wait = WaitOnDrop(&done);
        for _ in 0..helpers {
            let Some(tx) = helper() else { break };
            let work: Box<dyn FnOnce() + Send + '_> = Box::new(share);
            // SAFETY: the job borrows `next` and `part`, which live until this
            // function returns; `_wait` blocks the return (and any unwinding past
            // this frame) until every job sent here has finished running.
            let work: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(work) };
            done.add();
            if let Err(mpsc::SendError(job)) = tx.send(Job { work, done: Arc::clone(&done) }) {
                // The helper is gone (it never exits, so this is defensive): undo.
                drop(job);
                done.count_down();
            }
        }
        share();
    }
    if done.panicked.load(Ordering::Relaxed) {
        panic!("an emulator helper thread panicked while splitting an instruction");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_finished_program_lends_its_share_to_those_still_running() {
        let budget = ThreadBudget::new(2, 2);
        assert_eq!(budget.helpers(), 0, "two programs fill two threads");
        budget.finished();
        assert_eq!(budget.helpers(), 1, "the last program gets the freed thread");
        budget.finished();
        budget.finished();
        assert_eq!(budget.helpers(), 1, "no wrap below zero running");
        // 8 programs on 4 threads: none until only 2 run.
        let ring = ThreadBudget::new(4, 8);
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push(ring.helpers());
            ring.finished();
        }
        assert_eq!(seen, [0, 0, 0, 0, 0, 0, 1, 3]);
    }

    #[test]
    fn every_part_runs_once_whatever_the_helpers() {
        for helpers in [0, 1, 3, 8] {
            let hits: Vec<AtomicU64> = (0..37).map(|_| AtomicU64::new(0)).collect();
            split(helpers, hits.len(), &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "{helpers} helpers");
        }
    }

    #[test]
    fn helpers_take_part_and_are_reused() {
        let threads = Mutex::new(std::collections::HashSet::new());
        for _ in 0..50 {
            split(2, 16, &|_| {
                threads.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(std::time::Duration::from_micros(200));
            });
        }
        let n = threads.lock().unwrap().len();
        assert!(n >= 2, "only the caller worked");
        // Without reuse 50 splits would start 100 helpers; with it, the caller and
        // the few helpers parked in the pool (which tests running alongside share).
        assert!(n < 20, "{n} threads: helpers are not reused");
    }

    #[test]
    fn a_panicking_part_panics_the_caller_after_all_parts_stop() {
        let finished = AtomicU64::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            split(2, 8, &|i| {
                if i == 5 {
                    panic!("part 5");
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
                finished.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(r.is_err());
        let after = finished.load(Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(finished.load(Ordering::Relaxed), after, "a part ran after split returned");
    }
}
