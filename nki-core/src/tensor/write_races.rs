//! Races between the programs of a launch on shared HBM.
//!
//! The programs of a launch (the LNC2 pair of a rank; ranks handed one tensor)
//! run side by side. When one writes an element of a shared-HBM tensor and
//! another writes or reads it with no synchronisation between the two accesses,
//! nothing fixes their order on the hardware: the value left (or read) depends
//! on timing, and the emulator's threads would pick one silently. The launch
//! reports such a race as an error instead, naming the element and the programs.
//!
//! Synchronisations are the rendezvous of the launch: `core_barrier`,
//! `sendrecv` and the collectives. Their order is tracked with vector clocks:
//! every program keeps a clock per program of the launch; a rendezvous joins its
//! participants' clocks, then advances each one's own entry. Each element of a
//! shared-HBM allocation remembers its last writer and that program's clock at
//! the write; a later access by another program is ordered after the write when
//! the accessor's clock of the writer has reached it. The operands of an
//! instruction that synchronises (a barrier, a collective, a sendrecv) are part
//! of its rendezvous and are not checked (nor is the fill of a new HBM tensor
//! by `nl.zeros` and the like, which is not an instruction). Reads are remembered too, in
//! allocations some program wrote or with cells nothing wrote yet (so reads of
//! inputs cost nothing): one read per element, the last unless another
//! program's unordered read came first, so a write unordered with a read by
//! another program is reported, except after reads by three programs or more
//! (a read of a cell nothing wrote, then another program's unordered first
//! write, is found whichever of the two the threads run first). A launch of
//! one program keeps no record.
//!
//! A write that leaves every element it covers as it was changes nothing a
//! reader could see, in either order (the library's kernels zero a shared
//! output from both programs of a pair), so writes are judged by their
//! values, as the NumPy executor judges them: an instruction's writes to
//! shared HBM stay pending until it is done (the program begins its next
//! instruction, or ends); then an element it changed takes its stamp and is
//! checked against the other programs' unordered accesses, and an element it
//! left as it was is not an access (over another program's unordered write of
//! that value, the element is then neither program's). An access by another
//! program to an element whose write is pending waits until that write is done.
//! A race found when a write is done names the writing instruction and its
//! kernel line.
use super::Tensor;
use super::psum_writes::unravel;
use super::run_map::RunMap;
use super::unwritten::{Reach, base_runs, cells_within};
use crate::profile::Rendezvous;
use crate::{Buffer, ErrorKind, NkiError, Result};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The kernel line an instruction was issued from.
pub(crate) type Line = Option<(&'static str, u32)>;

/// The happens-before record of a launch of several programs.
pub(crate) struct WriteRaces {
    programs: usize,
    ranks: usize,
    state: Mutex<State>,
    /// Signalled when a program is done with an instruction, for an access
    /// waiting on that instruction's pending writes.
    progress: Condvar,
    /// How many accesses wait on `progress` (none: nobody is signalled).
    waiting: AtomicUsize,
    /// How many instructions each program has begun (`u64::MAX` once it ended).
    begun: Vec<AtomicU64>,
    /// Whether each program's latest instruction has writes pending.
    pending: Vec<AtomicBool>,
}

struct State {
    /// `clocks[s][t]`: how far program `s` has seen program `t`'s clock (its
    /// own entry: its own clock, from 1).
    clocks: Vec<Vec<u32>>,
    /// The accesses to each shared-HBM allocation some program wrote, by storage id.
    written: HashMap<u64, Record>,
    /// Per program: the writes of its latest instruction, to judge once it is done.
    writes: Vec<Vec<PendingWrite>>,
}

/// The last write and a read of each cell of one allocation: 0 for none, else
/// `(program + 1) << 32 | its clock at the access`.
struct Record {
    writes: RunMap<u64>,
    /// The last read, except that a read by another program unordered with it
    /// stays, so a later write by either program finds the other's read.
    reads: RunMap<u64>,
    /// `program + 1` of the instruction whose write of the cell is pending, or 0.
    pending: RunMap<u32>,
}

impl Record {
    /// The record of an allocation of `len` cells nothing has accessed.
    fn new(len: usize) -> Record {
        Record { writes: RunMap::new(len), reads: RunMap::new(len), pending: RunMap::new(len) }
    }
}

/// An element accessed by two programs without a synchronisation between.
struct Race {
    /// The element, as an index of the allocation.
    cell: usize,
    /// The program that accessed it first.
    first: usize,
    /// Whether that first access wrote it (else it read it).
    first_wrote: bool,
}

/// An instruction's write of some cells of one shared-HBM allocation, judged
/// once the instruction is done.
struct PendingWrite {
    /// A view of the allocation.
    tensor: Tensor,
    op: String,
    line: Line,
    /// The writer's stamp at the write.
    stamp: u64,
    /// The cells written, as ascending runs, and the bits they held before
    /// (`None`: unwritten), run after run.
    runs: Vec<Range<usize>>,
    before: Vec<Option<u32>>,
}

impl WriteRaces {
    /// The record of a launch of `ranks` × `programs` programs; `None` for a
    /// launch of one program, which cannot race with itself.
    pub(crate) fn new(ranks: usize, programs: usize) -> Option<WriteRaces> {
        let n = ranks * programs;
        let clocks = (0..n)
            .map(|s| {
                let mut c = vec![0; n];
                c[s] = 1;
                c
            })
            .collect();
        let state = State { clocks, written: HashMap::new(), writes: (0..n).map(|_| Vec::new()).collect() };
        (n > 1).then(|| WriteRaces {
            programs,
            ranks,
            state: Mutex::new(state),
            progress: Condvar::new(),
            waiting: AtomicUsize::new(0),
            begun: (0..n).map(|_| AtomicU64::new(0)).collect(),
            pending: (0..n).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Program `slot`'s instruction `op`, issued at `line`, reads `reads` and
    /// writes `writes` (unless it synchronises with `who`): an error naming the
    /// first element of shared HBM another program read or changed, unordered
    /// with this read, or with this write when the write changes it. A write is
    /// judged when the instruction is done (at the program's next instruction
    /// or end), so the error of a racing write comes from there.
    pub(crate) fn access(&self, slot: usize, op: &str, line: Line, reads: &[&Tensor], writes: &[&Tensor], who: &Rendezvous) -> Result<()> {
        // The program's previous instruction is done: its writes are in place.
        self.next_instruction(slot, 1)?;
        let shared = |ts: &[&Tensor]| ts.iter().any(|t| t.buffer() == Buffer::SharedHbm);
        if *who != Rendezvous::None || !(shared(reads) || shared(writes)) {
            return Ok(());
        }
        let hbm = |ts: &[&Tensor]| ts.iter().filter(|t| t.buffer() == Buffer::SharedHbm).map(|&t| t.clone()).collect::<Vec<_>>();
        let (reads, writes) = (hbm(reads), hbm(writes));
        let mut st = self.lock();
        // Another program's pending write of a cell this reaches is waited for.
        while let Some(other) = reads.iter().chain(&writes).find_map(|t| st.pending_other(slot, t)) {
            st = self.after_instruction_of(st, other);
        }
        for t in &reads {
            if let Some(race) = st.read(slot, t) {
                return Err(self.error(op, t, slot, false, &race));
            }
        }
        for t in &writes {
            let write = st.begin_write(slot, t, op, line);
            st.writes[slot].push(write);
            self.pending[slot].store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Program `slot` ended: its last instruction's writes are judged, and
    /// no access of another program waits for it any more.
    pub(crate) fn finish(&self, slot: usize) -> Result<()> {
        self.next_instruction(slot, u64::MAX)
    }

    /// Program `slot`'s latest instruction is done (it begins another, `step`
    /// 1, or ends, `u64::MAX`): its pending writes are judged, then an access
    /// waiting for them may go on.
    fn next_instruction(&self, slot: usize, step: u64) -> Result<()> {
        let judged = if self.pending[slot].swap(false, Ordering::AcqRel) {
            let mut st = self.lock();
            let writes = std::mem::take(&mut st.writes[slot]);
            // Every write is settled, so that no access waits for a cell of it
            // in vain; the first race is the one reported.
            let mut first = None;
            for w in writes {
                if let Some(race) = st.end_write(slot, &w) {
                    let e = self.error(&w.op, &w.tensor, slot, true, &race);
                    first = first.or_else(|| Some(w.line.map_or(e.clone(), |(file, line)| e.at(file, line))));
                }
            }
            first.map_or(Ok(()), Err)
        } else {
            Ok(())
        };
        let begun = &self.begun[slot];
        begun.store(begun.load(Ordering::Relaxed).saturating_add(step), Ordering::Release);
        if self.waiting.load(Ordering::Acquire) > 0 {
            // Under the lock, so that an access about to wait sees the change or is woken.
            let _st = self.lock();
            self.progress.notify_all();
        }
        judged
    }

    /// Waits (the lock released) until program `other` is done with its latest
    /// instruction, whose writes are then judged and in place.
    fn after_instruction_of<'a>(&self, mut st: MutexGuard<'a, State>, other: usize) -> MutexGuard<'a, State> {
        let at = self.begun[other].load(Ordering::Acquire);
        self.waiting.fetch_add(1, Ordering::AcqRel);
        while self.begun[other].load(Ordering::Acquire) == at {
            // Timed: the other program may signal between this check and the wait.
            st = self.progress.wait_timeout(st, Duration::from_millis(1)).unwrap_or_else(|e| e.into_inner()).0;
        }
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        st
    }

    /// The programs `slots` met at a rendezvous: each has now seen what any of
    /// them had, and what each does next is ordered after it.
    pub(crate) fn synchronise(&self, slots: &[usize]) {
        let mut st = self.lock();
        let n = st.clocks.len();
        let joined: Vec<u32> = (0..n).map(|t| slots.iter().map(|&s| st.clocks[s][t]).max().unwrap_or(0)).collect();
        for &s in slots {
            st.clocks[s].clone_from(&joined);
            st.clocks[s][s] += 1;
        }
    }

    fn name(&self, slot: usize) -> String {
        if self.ranks == 1 { format!("program {slot}") } else { format!("rank {} program {}", slot / self.programs, slot % self.programs) }
    }

    fn error(&self, op: &str, t: &Tensor, slot: usize, write: bool, race: &Race) -> NkiError {
        let element = unravel(&t.storage().allocation().shape, race.cell);
        let verb = |wrote: bool| if wrote { "written" } else { "read" };
        let (first, then) = (self.name(race.first), self.name(slot));
        let (a, b) = (verb(race.first_wrote), verb(write));
        let and = if a == b { String::new() } else { format!("{b} ") };
        let message = format!(
            "element {element:?} of {} is {a} by {first} and {and}by {then} without a synchronisation between, so the \
             result depends on timing; a core_barrier (or a collective) both programs join orders them",
            t.allocation_description()
        );
        NkiError::new(ErrorKind::Race, message).in_op(op)
    }
}

/// The cells of the allocation of `t` that its elements reach (those inside it:
/// cells outside are the instruction's bounds error to report), as ranges: a
/// contiguous run of cells at once, the cells of other runs one at a time.
fn ranges_of(t: &Tensor, len: usize, mut f: impl FnMut(Range<usize>)) {
    base_runs(t, Reach::Whole, |start, n, step| match contiguous(start, n, step, len) {
        Some(run) => f(run),
        None => run_cells(start, n, step, len, |c| f(c..c + 1)),
    });
}

/// The cells of the run `start + i·step` (`i < n`) inside an allocation of `len` cells.
fn run_cells(start: isize, n: usize, step: isize, len: usize, mut f: impl FnMut(usize)) {
    for i in 0..n as isize {
        if let Some(c) = usize::try_from(start + i * step).ok().filter(|&c| c < len) {
            f(c);
        }
    }
}

/// The cells `start..start + n` when a run is ascending and wholly inside an
/// allocation of `len` cells (then handled a slice at a time).
fn contiguous(start: isize, n: usize, step: isize, len: usize) -> Option<Range<usize>> {
    let s = cells_within(start, n, len).filter(|_| step == 1 || n == 1)?;
    Some(s..s + n)
}

impl State {
    /// Another program whose pending write covers a cell of `t`.
    fn pending_other(&self, slot: usize, t: &Tensor) -> Option<usize> {
        let alloc = t.storage().allocation();
        let rec = self.written.get(&alloc.id)?;
        let mut other = None;
        ranges_of(t, alloc.len(), |cells| {
            if other.is_none() {
                other = rec.pending.find(cells, |_, p| (p != 0 && p as usize - 1 != slot).then(|| p as usize - 1));
            }
        });
        other
    }

    /// The program of an access stamped `stamp` when it is not `slot` and
    /// `slot` has not seen it (the two are unordered).
    fn unordered(&self, slot: usize, stamp: u64) -> Option<usize> {
        let (program, at) = ((stamp >> 32) as usize, stamp as u32);
        (program != 0 && program - 1 != slot && self.clocks[slot][program - 1] < at).then(|| program - 1)
    }

    fn stamp(&self, slot: usize) -> u64 {
        ((slot as u64 + 1) << 32) | u64::from(self.clocks[slot][slot])
    }

    /// Program `slot` reads every element of `t`: the first element another
    /// program changed unordered with this read. Reads are recorded only in
    /// allocations a program wrote or with cells nothing wrote yet.
    fn read(&mut self, slot: usize, t: &Tensor) -> Option<Race> {
        let alloc = t.storage().allocation();
        let now = self.stamp(slot);
        let mut rec = match self.written.remove(&alloc.id) {
            Some(rec) => rec,
            None if t.may_be_unwritten() => Record::new(alloc.len()),
            None => return None,
        };
        let mut race = None;
        ranges_of(t, alloc.len(), |cells| {
            if race.is_none() {
                race = self.first_unordered(slot, &rec.writes, cells.clone(), true);
            }
            for piece in rec.reads.pieces_where(cells, |r| self.unordered(slot, r).is_none()) {
                rec.reads.fill(piece, now);
            }
        });
        self.written.insert(alloc.id, rec);
        race
    }

    /// Program `slot`'s instruction `op` begins writing every element of `t`:
    /// the cells and what they hold before, pending until it is done.
    fn begin_write(&mut self, slot: usize, t: &Tensor, op: &str, line: Line) -> PendingWrite {
        let alloc = t.storage().allocation();
        let len = alloc.len();
        let rec = self.written.entry(alloc.id).or_insert_with(|| Record::new(len));
        let values = alloc.cells.read().unwrap_or_else(|e| e.into_inner());
        // Sized up front: growing it cell by cell copies it into new pages.
        let (mut runs, mut before): (Vec<Range<usize>>, _) = (Vec::new(), Vec::with_capacity(t.numel()));
        // What a cell nothing wrote holds is unknown: any write changes it. A
        // run wholly written or wholly unwritten (the usual cases) is taken whole.
        alloc.with_unwritten(|unwritten| {
            ranges_of(t, len, |cells| {
                rec.pending.fill(cells.clone(), slot as u32 + 1);
                let held = values[cells.clone()].iter().map(|v| Some(v.to_bits()));
                match unwritten.map_or(0, |u| u.count_run(cells.start, cells.len()).0) {
                    0 => before.extend(held),
                    n if n == cells.len() => before.resize(before.len() + n, None),
                    _ => before.extend(held.zip(cells.clone()).map(|(v, c)| v.filter(|_| !unwritten.is_some_and(|u| u.is_unwritten(c))))),
                }
                match runs.last_mut() {
                    Some(last) if last.end == cells.start => last.end = cells.end,
                    _ => runs.push(cells),
                }
            })
        });
        PendingWrite { tensor: t.clone(), op: op.to_string(), line, stamp: self.stamp(slot), runs, before }
    }

    /// The first cell of `cells` another program wrote or read unordered
    /// with a write of program `slot` (at one cell, its write).
    fn first_race(&self, slot: usize, rec: &Record, cells: Range<usize>) -> Option<Race> {
        let by_write = self.first_unordered(slot, &rec.writes, cells.clone(), true);
        let end = by_write.as_ref().map_or(cells.end, |race| race.cell + 1);
        let by_read = self.first_unordered(slot, &rec.reads, cells.start..end, false);
        match (by_write, by_read) {
            (Some(w), Some(r)) if r.cell < w.cell => Some(r),
            (w, r) => w.or(r),
        }
    }

    /// The first cell of `cells` whose stamp in `stamps` (writes when `wrote`,
    /// else reads) is another program's, unordered with program `slot`.
    fn first_unordered(&self, slot: usize, stamps: &RunMap<u64>, cells: Range<usize>, wrote: bool) -> Option<Race> {
        stamps.find(cells, |piece, s| self.unordered(slot, s).map(|first| Race { cell: piece.start, first, first_wrote: wrote }))
    }

    /// Program `slot`'s write `w` is done: each cell it changed takes its stamp
    /// and is checked against unordered accesses of other programs (the first
    /// found is returned); a cell it left as it was is no access, and over an
    /// unordered write it is neither program's.
    fn end_write(&mut self, slot: usize, w: &PendingWrite) -> Option<Race> {
        let alloc = w.tensor.storage().allocation();
        let mut rec = self.written.remove(&alloc.id)?;
        let values = alloc.cells.read().unwrap_or_else(|e| e.into_inner());
        let mut race = None;
        let mut done = 0;
        for run in &w.runs {
            rec.pending.fill(run.clone(), 0);
            let before = &w.before[done..done + run.len()];
            done += run.len();
            // The run in pieces the write changed throughout or left as they were throughout.
            let now = &values[run.clone()];
            let changed = |b: &Option<u32>, v: &f32| *b != Some(v.to_bits());
            let mut at = 0;
            while at < run.len() {
                let c = changed(&before[at], &now[at]);
                let same = before[at + 1..].iter().zip(&now[at + 1..]).position(|(b, v)| changed(b, v) != c);
                let end = same.map_or(run.len(), |k| at + 1 + k);
                let piece = run.start + at..run.start + end;
                if c {
                    race = race.or_else(|| self.first_race(slot, &rec, piece.clone()));
                    rec.writes.fill(piece, w.stamp);
                } else {
                    for by_other in rec.writes.pieces_where(piece, |s| self.unordered(slot, s).is_some()) {
                        rec.writes.fill(by_other, 0);
                    }
                }
                at = end;
            }
        }
        drop(values);
        self.written.insert(alloc.id, rec);
        race
    }
}
