//! Cross-program synchronisation: core barriers, collectives, failure propagation,
//! deadlock detection and the deadline of one emulated launch.
//!
//! Every program of every rank is a thread. A program that fails records its error
//! and wakes everyone; a program that waits on a barrier or collective notices the
//! failure, a partner that already finished, a state where every live program is
//! waiting (a deadlock), or the launch's deadline, and returns an error instead of
//! hanging. Busy programs learn of a failure or the deadline from [`World::stopped`],
//! which every op and every kernel loop iteration checks (one atomic load).

use super::launch::STRICT_UNINIT_ENV;
use crate::collectives::CommEvent;
use crate::tensor::{Found, Reach, WriteRaces};
use crate::{ErrorKind, NkiError, Result, Tensor};
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// A program's index in the launch: `rank * programs_per_rank + program`.
pub(crate) type Slot = usize;

/// What a rendezvous synchronises.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RvKey {
    /// The `seq`-th `core_barrier` of a rank.
    Barrier { rank: usize, seq: u64 },
    /// The `seq`-th collective a replica group (given by its ranks) issues.
    Collective { group: Vec<usize>, seq: u64 },
    /// The `seq`-th `sendrecv` on pipe `pipe` between the programs of a rank.
    Pipe { rank: usize, pipe: i64, seq: u64 },
}

struct Rendezvous {
    kind: String,
    participants: Vec<Slot>,
    arrived: Vec<Slot>,
    payloads: Vec<(Slot, Box<dyn Any + Send>)>,
    done: Option<Result<()>>,
    observed: usize,
}

#[derive(Default)]
struct SyncState {
    error: Option<NkiError>,
    finished: Vec<bool>,
    waiting: Vec<Option<String>>,
    rendezvous: HashMap<RvKey, Rendezvous>,
}

/// Whether the programs of a launch must stop, and why (the values of `World::halt`).
const RUNNING: u8 = 0;
const FAILED: u8 = 1;
const TIMED_OUT: u8 = 2;

/// Shared state of one launch.
pub(crate) struct World {
    pub(crate) ranks: usize,
    pub(crate) programs: usize,
    /// `RUNNING` until a program fails (`FAILED`) or the deadline passes
    /// (`TIMED_OUT`); the first of the two wins.
    halt: AtomicU8,
    state: Mutex<SyncState>,
    cv: Condvar,
    comm: Mutex<Vec<CommEvent>>,
    /// Reads of unwritten memory, one entry per (tensor, instruction, kernel
    /// line): the element reads summed, the first cell kept.
    undefined: Mutex<Vec<UndefinedSite>>,
    /// Which program last wrote each shared-HBM element, to report races (`None`
    /// for a launch of one program).
    pub(crate) races: Option<WriteRaces>,
}

/// Where a launch read memory nothing wrote: the tensor (`'name' [shape] dtype
/// in BUFFER`), the instruction and its kernel line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct UndefinedSite {
    tensor: String,
    op: &'static str,
    line: Option<(&'static str, u32)>,
    count: usize,
    first: Vec<usize>,
}

impl World {
    pub(crate) fn new(ranks: usize, programs: usize) -> World {
        let n = ranks * programs;
        World {
            ranks,
            programs,
            halt: AtomicU8::new(RUNNING),
            state: Mutex::new(SyncState { finished: vec![false; n], waiting: vec![None; n], ..Default::default() }),
            cv: Condvar::new(),
            comm: Mutex::new(Vec::new()),
            undefined: Mutex::new(Vec::new()),
            races: WriteRaces::new(ranks, programs),
        }
    }

    /// Adds `count` element reads of unwritten cells of `tensor` by `op` at `line`.
    pub(crate) fn record_undefined(&self, tensor: String, op: &'static str, line: Option<(&'static str, u32)>, found: Found) {
        let mut sites = self.undefined.lock().unwrap_or_else(|e| e.into_inner());
        match sites.iter_mut().find(|s| s.tensor == tensor && s.op == op && s.line == line) {
            Some(s) => s.count += found.count,
            None => sites.push(UndefinedSite { tensor, op, line, count: found.count, first: found.first }),
        }
    }

    /// Reports the cells nothing wrote that `op`, issued at `line`, reads
    /// through `reads` (an error when `strict`).
    pub(crate) fn check_unwritten<'a>(
        &self,
        strict: bool,
        op: &'static str,
        line: Option<(&'static str, u32)>,
        reads: impl IntoIterator<Item = (&'a Tensor, Reach<'a>)>,
    ) -> Result<()> {
        self.report_unwritten(strict, op, line, find_unwritten(op, reads))
    }

    /// Reports `found` ([`find_unwritten`]): the first read as an error when
    /// `strict`, else every read as a warning of the launch.
    pub(crate) fn report_unwritten(
        &self,
        strict: bool,
        op: &'static str,
        line: Option<(&'static str, u32)>,
        found: Vec<(String, Found)>,
    ) -> Result<()> {
        for (tensor, found) in found {
            if strict {
                let text = undefined_read("the instruction", &tensor, found.count, &found.first);
                let msg = format!("undefined behaviour: {text} ({STRICT_UNINIT_ENV}=1 makes this an error)");
                return Err(NkiError::new(ErrorKind::Undefined, msg).in_op(op));
            }
            self.record_undefined(tensor, op, line, found);
        }
        Ok(())
    }

    /// The reports of the unwritten reads so far, one line per site.
    pub(crate) fn undefined_reads(&self) -> Vec<String> {
        let sites = self.undefined.lock().unwrap_or_else(|e| e.into_inner());
        sites
            .iter()
            .map(|s| format!("undefined behaviour: {}", undefined_read(&op_at(s.op, s.line), &s.tensor, s.count, &s.first)))
            .collect()
    }

    /// Records a completed collective.
    pub(crate) fn record_comm(&self, ev: CommEvent) {
        self.comm.lock().unwrap_or_else(|e| e.into_inner()).push(ev);
    }

    /// The collectives completed so far, in order.
    pub(crate) fn take_comm_log(&self) -> Vec<CommEvent> {
        std::mem::take(&mut *self.comm.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn slot_name(&self, slot: Slot) -> String {
        format!("rank {} program {}", slot / self.programs, slot % self.programs)
    }

    /// `None` while the launch runs; once it must stop, the error a program returns:
    /// `Aborted` after another program's failure, `Timeout` (with `activity`, what
    /// this program was doing) after the deadline.
    #[inline]
    pub(crate) fn stopped(&self, activity: impl FnOnce() -> String) -> Option<NkiError> {
        match self.halt.load(Ordering::Relaxed) {
            RUNNING => None,
            TIMED_OUT => Some(NkiError::new(ErrorKind::Timeout, activity())),
            _ => Some(self.aborted_error()),
        }
    }

    /// True once the deadline passed with programs still running.
    pub(crate) fn timed_out(&self) -> bool {
        self.halt.load(Ordering::Relaxed) == TIMED_OUT
    }

    /// The deadline passed: unless every program already finished, tells them all
    /// to stop and wakes those that wait.
    pub(crate) fn time_out(&self) {
        let st = self.lock();
        if st.finished.iter().all(|&f| f) {
            return;
        }
        let _ = self.halt.compare_exchange(RUNNING, TIMED_OUT, Ordering::Relaxed, Ordering::Relaxed);
        self.cv.notify_all();
    }

    fn aborted_error(&self) -> NkiError {
        NkiError::new(ErrorKind::Aborted, "stopped because another program of the launch failed")
    }

    /// Records the first failure and wakes every waiting program.
    pub(crate) fn fail(&self, err: NkiError) {
        let mut st = self.lock();
        self.fail_locked(&mut st, err);
    }

    fn fail_locked(&self, st: &mut SyncState, err: NkiError) {
        if st.error.is_none() && err.kind != ErrorKind::Aborted {
            st.error = Some(err);
        }
        let _ = self.halt.compare_exchange(RUNNING, FAILED, Ordering::Relaxed, Ordering::Relaxed);
        self.cv.notify_all();
    }

    /// The first root-cause error, if any program failed.
    pub(crate) fn first_error(&self) -> Option<NkiError> {
        self.lock().error.clone()
    }

    /// Marks a program as finished (successfully or not).
    pub(crate) fn finish(&self, slot: Slot) {
        let mut st = self.lock();
        st.finished[slot] = true;
        st.waiting[slot] = None;
        self.check_deadlock(&mut st);
        self.cv.notify_all();
    }

    fn check_deadlock(&self, st: &mut SyncState) {
        let live: Vec<usize> = (0..st.finished.len()).filter(|&s| !st.finished[s]).collect();
        let halted = self.halt.load(Ordering::Relaxed) != RUNNING;
        if live.is_empty() || halted || st.error.is_some() || live.iter().any(|&s| st.waiting[s].is_none()) {
            return;
        }
        // A partner that finished without joining is the root cause, whichever
        // thread notices the stall first.
        let gone = st.rendezvous.values().filter(|rv| rv.done.is_none()).find_map(|rv| {
            let waiter = *rv.arrived.first()?;
            rv.participants.iter().find(|&&p| st.finished[p] && !rv.arrived.contains(&p)).map(|&p| (p, rv.kind.clone(), waiter))
        });
        if let Some((p, kind, waiter)) = gone {
            let err = self.missing_partner(p, &kind, waiter);
            self.fail_locked(st, err);
            return;
        }
        let detail: Vec<String> =
            live.iter().map(|&s| format!("{} waits in {}", self.slot_name(s), st.waiting[s].as_deref().unwrap_or("?"))).collect();
        let err = NkiError::new(
            ErrorKind::Collective,
            format!("deadlock: every live program is waiting and none can proceed ({})", detail.join("; ")),
        );
        self.fail_locked(st, err);
    }

    /// The error for `partner` finishing without joining the `kind` that `waiter` waits in.
    fn missing_partner(&self, partner: Slot, kind: &str, waiter: Slot) -> NkiError {
        NkiError::new(
            ErrorKind::Collective,
            format!("{} finished without joining {kind}, which {} is waiting in", self.slot_name(partner), self.slot_name(waiter)),
        )
    }

    /// The participants of `rv` that have not arrived, by name.
    fn absent(&self, rv: &Rendezvous) -> String {
        let names: Vec<String> = rv.participants.iter().filter(|p| !rv.arrived.contains(p)).map(|&p| self.slot_name(p)).collect();
        names.join(", ")
    }

    /// Joins the rendezvous `key` as `me`, contributing `payload`. The last of
    /// `participants` to arrive runs `complete` on every payload (in arrival order);
    /// everyone returns its result. All participants must use the same `kind`.
    pub(crate) fn rendezvous<T: Send + 'static>(
        &self,
        me: Slot,
        key: RvKey,
        kind: &str,
        participants: &[Slot],
        payload: T,
        complete: impl FnOnce(Vec<(Slot, T)>) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.lock();
        if let Some(e) = self.stopped(|| format!("arriving at {kind}")) {
            return Err(e);
        }
        let rv = st.rendezvous.entry(key.clone()).or_insert_with(|| Rendezvous {
            kind: kind.to_string(),
            participants: participants.to_vec(),
            arrived: Vec::new(),
            payloads: Vec::new(),
            done: None,
            observed: 0,
        });
        if rv.kind != kind || rv.participants != participants {
            let err = NkiError::new(
                ErrorKind::Collective,
                format!(
                    "{} issued {kind} over {:?} where its partners issued {} over {:?} (programs must issue \
                     the same barriers and collectives in the same order)",
                    self.slot_name(me),
                    slot_ranks(participants, self.programs),
                    rv.kind,
                    slot_ranks(&rv.participants, self.programs)
                ),
            );
            self.fail_locked(&mut st, err.clone());
            return Err(err);
        }
        rv.payloads.push((me, Box::new(payload)));
        rv.arrived.push(me);
        if rv.arrived.len() == participants.len() {
            if let Some(r) = &self.races {
                r.synchronise(participants);
            }
            let payloads = std::mem::take(&mut rv.payloads);
            drop(st);
            let typed = payloads
                .into_iter()
                .map(|(s, p)| (s, *p.downcast::<T>().expect("a rendezvous key always carries one payload type")))
                .collect();
            let result = complete(typed);
            st = self.lock();
            if let Err(e) = &result {
                self.fail_locked(&mut st, e.clone());
            }
            for &p in participants {
                st.waiting[p] = None;
            }
            if let Some(rv) = st.rendezvous.get_mut(&key) {
                rv.done = Some(result);
            }
            self.cv.notify_all();
        } else {
            st.waiting[me] = Some(kind.to_string());
            self.check_deadlock(&mut st);
        }
        loop {
            if let Some(rv) = st.rendezvous.get_mut(&key)
                && let Some(res) = rv.done.clone()
            {
                rv.observed += 1;
                if rv.observed == rv.participants.len() {
                    st.rendezvous.remove(&key);
                }
                return res;
            }
            if self.timed_out() {
                st.waiting[me] = None;
                let missing = st.rendezvous.get(&key).map(|rv| self.absent(rv)).unwrap_or_default();
                return Err(NkiError::new(ErrorKind::Timeout, format!("waiting in {kind} for {missing}")));
            }
            let gone = st
                .rendezvous
                .get(&key)
                .and_then(|rv| rv.participants.iter().copied().find(|&p| st.finished[p] && !rv.arrived.contains(&p)));
            if let Some(p) = gone {
                let err = self.missing_partner(p, kind, me);
                st.waiting[me] = None;
                self.fail_locked(&mut st, err.clone());
                return Err(err);
            }
            if st.error.is_some() {
                st.waiting[me] = None;
                return Err(self.aborted_error());
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn slot_ranks(slots: &[Slot], programs: usize) -> Vec<usize> {
    let mut r: Vec<usize> = slots.iter().map(|s| s / programs).collect();
    r.dedup();
    r
}

/// The unwritten cells `op` reads through `reads`, with the allocation each is in.
pub(crate) fn find_unwritten<'a>(op: &str, reads: impl IntoIterator<Item = (&'a Tensor, Reach<'a>)>) -> Vec<(String, Found)> {
    // `core_barrier`'s tensor names what the programs synchronise on: the
    // barrier reads none of its values (the other program may still be writing them).
    if op == "nisa.core_barrier" {
        return Vec::new();
    }
    reads
        .into_iter()
        .filter_map(|(r, reach)| {
            let found = r.unwritten_read(reach)?;
            // The instruction reads them next: as zero bits, whatever the tile's buffer held.
            r.zero_leftovers(reach);
            Some((r.allocation_description(), found))
        })
        .collect()
}

/// `op (file:line)`, or the op alone when the line is not known.
fn op_at(op: &str, line: Option<(&str, u32)>) -> String {
    match line {
        Some((file, l)) => format!("{op} ({file}:{l})"),
        None => op.to_string(),
    }
}

/// The text of `subject` reading `count` unwritten elements of `tensor`, the
/// executor's words (`fake_nki/undefined.py`).
pub(crate) fn undefined_read(subject: &str, tensor: &str, count: usize, first: &[usize]) -> String {
    format!(
        "{subject} reads {count} element{} of {tensor} that nothing wrote since it was allocated (the first at {first:?}); \
         on hardware they hold whatever the memory held, here they read as zero bits",
        if count == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn last_arrival_completes_and_all_return() {
        let w = Arc::new(World::new(3, 1));
        let sum = Arc::new(Mutex::new(0));
        std::thread::scope(|s| {
            for me in 0..3 {
                let (w, sum) = (Arc::clone(&w), Arc::clone(&sum));
                s.spawn(move || {
                    w.rendezvous(me, RvKey::Collective { group: vec![0, 1, 2], seq: 0 }, "x", &[0, 1, 2], me, |all| {
                        *sum.lock().unwrap() = all.iter().map(|(_, v)| v).sum::<usize>();
                        Ok(())
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(*sum.lock().unwrap(), 3);
    }

    #[test]
    fn a_partner_that_finished_is_an_error_not_a_hang() {
        let w = World::new(2, 1);
        w.finish(1);
        let err = w.rendezvous(0, RvKey::Barrier { rank: 0, seq: 0 }, "core_barrier", &[0, 1], (), |_| Ok(())).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Collective);
        assert!(err.message.contains("rank 1 program 0 finished without joining core_barrier"), "{err}");
    }

    #[test]
    fn the_deadline_releases_a_waiter_and_names_the_absent_partners() {
        let w = Arc::new(World::new(3, 1));
        let waiter = {
            let w = Arc::clone(&w);
            std::thread::spawn(move || w.rendezvous(0, RvKey::Collective { group: vec![0, 1, 2], seq: 0 }, "x", &[0, 1, 2], (), |_| Ok(())))
        };
        while w.lock().waiting[0].is_none() {
            std::thread::yield_now();
        }
        assert!(w.stopped(String::new).is_none());
        w.time_out();
        let err = waiter.join().unwrap().unwrap_err();
        assert_eq!(err.kind, ErrorKind::Timeout);
        assert_eq!(err.message, "waiting in x for rank 1 program 0, rank 2 program 0");
        assert_eq!(w.stopped(|| "busy".to_string()).map(|e| (e.kind, e.message)), Some((ErrorKind::Timeout, "busy".to_string())));
    }

    #[test]
    fn a_deadline_after_every_program_finished_changes_nothing() {
        let w = World::new(2, 1);
        w.finish(0);
        w.finish(1);
        w.time_out();
        assert!(!w.timed_out() && w.stopped(String::new).is_none());
    }

    #[test]
    fn the_first_of_failure_and_deadline_wins() {
        let w = World::new(2, 1);
        w.fail(NkiError::new(ErrorKind::Shape, "bad"));
        w.time_out();
        assert!(!w.timed_out());
        assert_eq!(w.stopped(String::new).map(|e| e.kind), Some(ErrorKind::Aborted));
        let w = World::new(2, 1);
        w.time_out();
        w.fail(NkiError::new(ErrorKind::Shape, "bad"));
        assert!(w.timed_out());
    }

    #[test]
    fn mismatched_collectives_deadlock_is_reported() {
        let w = Arc::new(World::new(2, 1));
        let errs: Vec<NkiError> = std::thread::scope(|s| {
            let a = {
                let w = Arc::clone(&w);
                s.spawn(move || w.rendezvous(0, RvKey::Barrier { rank: 0, seq: 0 }, "a", &[0, 1], (), |_| Ok(())))
            };
            let b = {
                let w = Arc::clone(&w);
                s.spawn(move || w.rendezvous(1, RvKey::Barrier { rank: 0, seq: 1 }, "b", &[0, 1], (), |_| Ok(())))
            };
            vec![a.join().unwrap().unwrap_err(), b.join().unwrap().unwrap_err()]
        });
        assert!(errs.iter().all(|e| matches!(e.kind, ErrorKind::Collective | ErrorKind::Aborted)));
        let root = w.first_error().unwrap();
        assert!(root.message.starts_with("deadlock"), "{root}");
    }
}
