//! The timeline: every recorded instruction placed on its unit once every
//! instruction whose tiles it reads or overwrites has finished (the semaphores
//! the compiler inserts), plus the hand-off latency between units, in the first
//! idle interval of its unit from then on that is long enough. Instructions are
//! taken in the order the compiler would issue them, not the program order:
//! NKI's loops are unrolled and the compiler schedules the flattened stream
//! ("full freedom to schedule instructions across the flattened instruction
//! stream", NKI docs, dynamic loops), so of the first instruction not yet placed
//! and the next ones within [`SCHEDULING_WINDOW`] that depend on no earlier
//! unplaced one, the one that can start first goes next (an independent
//! instruction fills the wait of a dependent one before it). Barriers and
//! collectives are fences: they start when every participant has reached them,
//! nothing moves past them, and a core barrier also waits for everything its
//! program issued before it.

use super::costs::{Cost, Costs, cost};
use super::record::{Instr, Operand, Region, Rendezvous, Unit};
use crate::{NkiError, Result};
use std::collections::HashMap;

/// The instruction stream of one program (one NeuronCore of one rank).
#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Rank (ring worker).
    pub rank: usize,
    /// Program id in the LNC grid.
    pub program: usize,
    /// Instructions in program order.
    pub instrs: Vec<Instr>,
}

/// One scheduled instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// Index of its stream.
    pub stream: usize,
    /// Index in the stream.
    pub index: usize,
    /// Its unit.
    pub unit: Unit,
    /// The NKI name.
    pub op: &'static str,
    /// Start (ns from the launch).
    pub start_ns: f64,
    /// End (ns).
    pub end_ns: f64,
    /// Its cost.
    pub cost: Cost,
    /// The slice (stream-local index) that decided its start, if any: the
    /// critical path runs backwards through these.
    pub after: Option<usize>,
}

/// The scheduled launch.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The streams, as recorded.
    pub streams: Vec<(usize, usize)>,
    /// `slices[stream][index]`.
    pub slices: Vec<Vec<Slice>>,
}

impl Timeline {
    /// End of the last instruction (ns).
    pub fn makespan_ns(&self) -> f64 {
        self.slices.iter().flatten().map(|s| s.end_ns).fold(0.0, f64::max)
    }

    /// The critical path, last instruction first: from the instruction that ends
    /// last, back through whatever each one waited for.
    pub fn critical_path(&self) -> Vec<&Slice> {
        let last = self.slices.iter().flatten().max_by(|a, b| a.end_ns.total_cmp(&b.end_ns));
        let mut path = Vec::new();
        let mut at = last;
        while let Some(s) = at {
            path.push(s);
            at = s.after.map(|i| &self.slices[s.stream][i]);
        }
        path
    }
}

/// A finished access to a region.
#[derive(Clone, Copy)]
struct Access {
    region: Region,
    end_ns: f64,
    unit: Unit,
    index: usize,
}

/// The accesses one program made so far, by storage.
#[derive(Default)]
struct Hazards {
    writes: HashMap<u64, Vec<Access>>,
    reads: HashMap<u64, Vec<Access>>,
}

fn covers(outer: &Region, inner: &Region) -> bool {
    outer.rows.0 <= inner.rows.0 && inner.rows.1 <= outer.rows.1 && outer.cols.0 <= inner.cols.0 && inner.cols.1 <= outer.cols.1
}

impl Hazards {
    /// The latest time a dependency of `i` (on `unit`) allows it to start, and which instruction that is.
    fn ready(&self, costs: &Costs, i: &Instr) -> (f64, Option<usize>) {
        let mut best = (0.0, None);
        let mut consider = |list: Option<&Vec<Access>>, r: &Region| {
            for a in list.into_iter().flatten().filter(|a| a.region.overlaps(r)) {
                let t = a.end_ns + costs.dependency_ns(a.unit, i.unit);
                if t > best.0 {
                    best = (t, Some(a.index));
                }
            }
        };
        for r in i.reads.iter().map(|o| &o.region) {
            consider(self.writes.get(&r.storage), r);
        }
        for r in i.writes.iter().map(|o| &o.region) {
            consider(self.writes.get(&r.storage), r);
            consider(self.reads.get(&r.storage), r);
        }
        best
    }

    fn record(&mut self, i: &Instr, s: &Slice) {
        let access = |region: Region| Access { region, end_ns: s.end_ns, unit: s.unit, index: s.index };
        for o in &i.reads {
            self.reads.entry(o.region.storage).or_default().push(access(o.region));
        }
        for o in &i.writes {
            // A write waited for every access it overlaps: later ones need only it.
            let r = o.region;
            for map in [&mut self.writes, &mut self.reads] {
                if let Some(list) = map.get_mut(&r.storage) {
                    list.retain(|a| !covers(&r, &a.region));
                }
            }
            self.writes.entry(r.storage).or_default().push(access(r));
        }
    }
}

/// The busy intervals of one unit; an instruction takes the first gap after it
/// is ready that is long enough. For the DMA engines, one shared resource: their
/// 16 queues run round-robin, so a transfer whose inputs are ready does not wait
/// behind an earlier one still waiting for its own (a store behind a matmul does
/// not hold up the next loads), modelled as the aggregate bandwidth. For a
/// compute engine, the compiler's schedule: an independent instruction fills
/// the gap an earlier one leaves while it waits for a result.
#[derive(Default)]
struct Lanes {
    /// Disjoint busy intervals `(start, end, last instruction)`, sorted; touching ones merged.
    busy: Vec<(f64, f64, usize)>,
}

impl Lanes {
    /// The earliest start at or after `ready` with `ns` free, and the transfer ending there.
    fn earliest(&self, ready: f64, ns: f64) -> (f64, Option<usize>) {
        let mut at = (ready, None);
        for &(s, e, who) in &self.busy {
            if e <= at.0 {
                continue;
            }
            if s >= at.0 + ns {
                break;
            }
            at = (e, Some(who));
        }
        at
    }

    fn occupy(&mut self, start: f64, end: f64, who: usize) {
        let i = self.busy.partition_point(|b| b.0 < start);
        self.busy.insert(i, (start, end, who));
        // Merge with touching neighbours so a saturated queue stays one interval.
        if i + 1 < self.busy.len() && self.busy[i + 1].0 <= end {
            let next = self.busy.remove(i + 1);
            self.busy[i].1 = next.1.max(end);
            self.busy[i].2 = next.2;
        }
        if i > 0 && self.busy[i - 1].1 >= start {
            let cur = self.busy.remove(i);
            self.busy[i - 1].1 = self.busy[i - 1].1.max(cur.1);
            if cur.1 >= self.busy[i - 1].1 {
                self.busy[i - 1].2 = cur.2;
            }
        }
    }
}

/// How many instructions from the first unscheduled one of a program the
/// compiler may move an instruction ahead over: it schedules the unrolled
/// stream (see the module doc) but the docs give no window, **chosen** 16 (a
/// few loop iterations of a typical body, enough to fill a dependent
/// instruction's hand-off latency with the next iteration's work).
pub const SCHEDULING_WINDOW: usize = 16;

/// Where one stream stands.
struct Cursor {
    /// The first instruction not yet scheduled.
    next: usize,
    /// Which instructions are scheduled.
    done: Vec<bool>,
    /// In-order units (collectives, which meet their peers in program order).
    free: HashMap<Unit, (f64, Option<usize>)>,
    /// The units that take instructions in the first gap that fits them.
    lanes: HashMap<Unit, Lanes>,
    hazards: Hazards,
    /// The latest end of any instruction so far, and its index.
    last_end: (f64, Option<usize>),
    barriers: usize,
    collectives: HashMap<Vec<usize>, usize>,
}

/// Whether `a` and `b` touch the same bytes with at least one writing them, so
/// neither may run before the other's program-order predecessor has.
fn conflict(a: &Instr, b: &Instr) -> bool {
    let hits = |x: &[Operand], y: &[Operand]| x.iter().any(|o| y.iter().any(|p| o.region.overlaps(&p.region)));
    hits(&a.writes, &b.writes) || hits(&a.writes, &b.reads) || hits(&a.reads, &b.writes)
}

/// Whether `unit` takes its instructions in program order (collectives, which
/// meet their peers in that order) rather than in the first gap that fits.
fn in_order(unit: Unit) -> bool {
    unit == Unit::Collective
}

/// An instruction chosen to go next: its index, its cost, and when it could
/// start and what decides that (before any rendezvous).
struct Pick {
    at: usize,
    cost: Cost,
    start: f64,
    after: Option<usize>,
}

impl Cursor {
    /// When `instr`, taking `busy_ns` on its unit, could start if it were
    /// scheduled now, and what decides it (before any rendezvous).
    fn earliest(&self, costs: &Costs, instr: &Instr, busy_ns: f64, slices: &[Option<Slice>]) -> (f64, Option<usize>) {
        let (mut dep_ready, mut dep_after) = self.hazards.ready(costs, instr);
        for &d in &instr.deps {
            if let Some(Some(s)) = slices.get(d) {
                let t = s.end_ns + costs.dependency_ns(s.unit, instr.unit);
                if t > dep_ready {
                    (dep_ready, dep_after) = (t, Some(d));
                }
            }
        }
        let (unit_free, unit_after) = if in_order(instr.unit) {
            self.free.get(&instr.unit).copied().unwrap_or((0.0, None))
        } else {
            self.lanes.get(&instr.unit).map_or((dep_ready, None), |l| l.earliest(dep_ready, busy_ns))
        };
        if dep_ready >= unit_free { (dep_ready, dep_after) } else { (unit_free, unit_after) }
    }

    /// [`Cursor::earliest`] of instruction `at` of `instrs`, with its cost.
    fn candidate(&self, costs: &Costs, instrs: &[Instr], at: usize, slices: &[Option<Slice>]) -> Pick {
        let c = cost(costs, &instrs[at]);
        let (start, after) = self.earliest(costs, &instrs[at], c.busy_ns, slices);
        Pick { at, cost: c, start, after }
    }

    /// The instruction to schedule next: of the first unscheduled one and those
    /// within [`SCHEDULING_WINDOW`] after it that depend on no unscheduled
    /// earlier one, the one that can start first (the earliest in program order
    /// on a tie). Nothing moves past a barrier or a collective.
    fn pick(&self, costs: &Costs, instrs: &[Instr], slices: &[Option<Slice>]) -> Pick {
        let mut best: Option<Pick> = None;
        let end = instrs.len().min(self.next + SCHEDULING_WINDOW);
        for j in self.next..end {
            if self.done[j] {
                continue;
            }
            let instr = &instrs[j];
            if instr.rendezvous != Rendezvous::None {
                if j == self.next {
                    return self.candidate(costs, instrs, j, slices);
                }
                break;
            }
            let blocked = (self.next..j).any(|k| !self.done[k] && conflict(&instrs[k], instr))
                || instr.deps.iter().any(|&d| !self.done.get(d).copied().unwrap_or(true));
            if blocked {
                continue;
            }
            let c = self.candidate(costs, instrs, j, slices);
            if best.as_ref().is_none_or(|b| c.start < b.start) {
                best = Some(c);
            }
        }
        // The first unscheduled instruction depends on nothing unscheduled, so
        // a candidate was always found.
        best.unwrap_or_else(|| self.candidate(costs, instrs, self.next, slices))
    }
}

/// Which rendezvous an instruction joins: its kind, its participants and its ordinal.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Meeting {
    Barrier { rank: usize, seq: usize },
    Ring { ranks: Vec<usize>, program: usize, seq: usize },
}

/// Schedules the streams of a launch on target `costs`.
pub fn schedule(costs: &Costs, streams: &[Stream]) -> Result<Timeline> {
    let mut cursors: Vec<Cursor> = streams
        .iter()
        .map(|st| Cursor {
            next: 0,
            done: vec![false; st.instrs.len()],
            free: HashMap::new(),
            lanes: HashMap::new(),
            hazards: Hazards::default(),
            last_end: (0.0, None),
            barriers: 0,
            collectives: HashMap::new(),
        })
        .collect();
    let mut slices: Vec<Vec<Option<Slice>>> = streams.iter().map(|s| vec![None; s.instrs.len()]).collect();
    let programs_of = |rank: usize| streams.iter().filter(|s| s.rank == rank).count();
    // Arrivals at each open rendezvous: (stream, earliest start, what decided it).
    let mut waiting: HashMap<Meeting, Vec<(usize, f64, Option<usize>)>> = HashMap::new();
    loop {
        let mut progressed = false;
        for (si, st) in streams.iter().enumerate() {
            let cur = &mut cursors[si];
            while cur.next < st.instrs.len() {
                let Pick { at, cost: c, start: ready, after: ready_after } = cur.pick(costs, &st.instrs, &slices[si]);
                let instr = &st.instrs[at];
                let in_order = in_order(instr.unit);
                let (mut start, mut after) = (ready, ready_after);
                // A core barrier fences the program: everything issued before it is done.
                if instr.rendezvous == Rendezvous::CoreBarrier && cur.last_end.0 > start {
                    (start, after) = cur.last_end;
                }
                let meeting = match &instr.rendezvous {
                    Rendezvous::None => None,
                    Rendezvous::CoreBarrier => Some(Meeting::Barrier { rank: st.rank, seq: cur.barriers }),
                    Rendezvous::Ranks(ranks) => {
                        let seq = cur.collectives.get(ranks).copied().unwrap_or(0);
                        Some(Meeting::Ring { ranks: ranks.clone(), program: st.program, seq })
                    }
                };
                if let Some(m) = meeting {
                    let need = match &m {
                        Meeting::Barrier { rank, .. } => programs_of(*rank),
                        Meeting::Ring { ranks, .. } => ranks.len(),
                    };
                    let arrived = waiting.entry(m.clone()).or_default();
                    if !arrived.iter().any(|a| a.0 == si) {
                        arrived.push((si, start, after));
                    }
                    if arrived.len() < need {
                        break;
                    }
                    let mine = arrived.iter().find(|a| a.0 == si).map_or((start, after), |a| (a.1, a.2));
                    let latest = arrived.iter().map(|a| a.1).fold(0.0, f64::max);
                    (start, after) = if latest > mine.0 { (latest, mine.1) } else { mine };
                    match &instr.rendezvous {
                        Rendezvous::CoreBarrier => cur.barriers += 1,
                        Rendezvous::Ranks(ranks) => *cur.collectives.entry(ranks.clone()).or_default() += 1,
                        Rendezvous::None => {}
                    }
                }
                // A rendezvous that moved the start may have moved it into another
                // instruction's interval: the first gap from there.
                if !in_order && start > ready {
                    let (at, who) = cur.lanes.get(&instr.unit).map_or((start, None), |l| l.earliest(start, c.busy_ns));
                    if at > start {
                        (start, after) = (at, who);
                    }
                }
                let slice = Slice {
                    stream: si,
                    index: at,
                    unit: instr.unit,
                    op: instr.op,
                    start_ns: start,
                    end_ns: start + c.done_ns,
                    cost: c,
                    after,
                };
                if in_order {
                    cur.free.insert(instr.unit, (slice.end_ns, Some(at)));
                } else {
                    cur.lanes.entry(instr.unit).or_default().occupy(slice.start_ns, slice.start_ns + c.busy_ns, at);
                }
                if slice.end_ns > cur.last_end.0 {
                    cur.last_end = (slice.end_ns, Some(at));
                }
                cur.hazards.record(instr, &slice);
                slices[si][at] = Some(slice);
                cur.done[at] = true;
                while cur.next < st.instrs.len() && cur.done[cur.next] {
                    cur.next += 1;
                }
                progressed = true;
            }
        }
        if cursors.iter().zip(streams).all(|(c, s)| c.next == s.instrs.len()) {
            break;
        }
        if !progressed {
            return Err(NkiError::argument(
                "streams",
                format!("{} programs", streams.len()),
                "the recorded barriers and collectives do not match up across programs, so they cannot be scheduled",
            ));
        }
    }
    let slices = slices.into_iter().map(|v| v.into_iter().flatten().collect()).collect();
    Ok(Timeline { streams: streams.iter().map(|s| (s.rank, s.program)).collect(), slices })
}
