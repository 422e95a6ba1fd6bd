//! The timeline: every recorded instruction placed on its unit's in-order queue,
//! starting once its unit is free and every instruction whose tiles it reads or
//! overwrites has finished (the semaphores the compiler inserts), plus the
//! hand-off latency between units. Barriers and collectives start when every
//! participant has reached them; a core barrier also waits for everything its
//! program issued before it.

use super::costs::{Cost, Costs, cost};
use super::record::{Instr, Region, Rendezvous, Unit};
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

/// The core's DMA engines as one shared resource: its 16 queues run round-robin,
/// so a transfer whose inputs are ready does not wait behind an earlier one that
/// is still waiting for its own (a store behind a matmul does not hold up the next
/// loads). Modelled as the busy intervals of the aggregate bandwidth; a transfer
/// takes the first gap after it is ready that is long enough.
#[derive(Default)]
struct DmaQueues {
    /// Disjoint busy intervals `(start, end, last instruction)`, sorted; touching ones merged.
    busy: Vec<(f64, f64, usize)>,
}

impl DmaQueues {
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

/// Where one stream stands.
struct Cursor {
    next: usize,
    free: HashMap<Unit, (f64, Option<usize>)>,
    dma: DmaQueues,
    hazards: Hazards,
    /// The latest end of any instruction so far, and its index.
    last_end: (f64, Option<usize>),
    barriers: usize,
    collectives: HashMap<Vec<usize>, usize>,
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
        .map(|_| Cursor {
            next: 0,
            free: HashMap::new(),
            dma: DmaQueues::default(),
            hazards: Hazards::default(),
            last_end: (0.0, None),
            barriers: 0,
            collectives: HashMap::new(),
        })
        .collect();
    let mut slices: Vec<Vec<Slice>> = streams.iter().map(|s| Vec::with_capacity(s.instrs.len())).collect();
    let programs_of = |rank: usize| streams.iter().filter(|s| s.rank == rank).count();
    // Arrivals at each open rendezvous: (stream, earliest start, what decided it).
    let mut waiting: HashMap<Meeting, Vec<(usize, f64, Option<usize>)>> = HashMap::new();
    loop {
        let mut progressed = false;
        for (si, st) in streams.iter().enumerate() {
            let cur = &mut cursors[si];
            while let Some(instr) = st.instrs.get(cur.next) {
                let c = cost(costs, instr);
                let (mut dep_ready, mut dep_after) = cur.hazards.ready(costs, instr);
                for &d in &instr.deps {
                    if let Some(s) = slices[si].get(d) {
                        let t = s.end_ns + costs.dependency_ns(s.unit, instr.unit);
                        if t > dep_ready {
                            (dep_ready, dep_after) = (t, Some(d));
                        }
                    }
                }
                let (unit_free, unit_after) = if instr.unit == Unit::Dma {
                    cur.dma.earliest(dep_ready, c.busy_ns)
                } else {
                    cur.free.get(&instr.unit).copied().unwrap_or((0.0, None))
                };
                let (mut start, mut after) = if dep_ready >= unit_free { (dep_ready, dep_after) } else { (unit_free, unit_after) };
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
                let slice = Slice {
                    stream: si,
                    index: cur.next,
                    unit: instr.unit,
                    op: instr.op,
                    start_ns: start,
                    end_ns: start + c.done_ns,
                    cost: c,
                    after,
                };
                if instr.unit == Unit::Dma {
                    cur.dma.occupy(slice.start_ns, slice.start_ns + c.busy_ns, cur.next);
                } else {
                    cur.free.insert(instr.unit, (slice.end_ns, Some(cur.next)));
                }
                if slice.end_ns > cur.last_end.0 {
                    cur.last_end = (slice.end_ns, Some(cur.next));
                }
                cur.hazards.record(instr, &slice);
                slices[si].push(slice);
                cur.next += 1;
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
    Ok(Timeline { streams: streams.iter().map(|s| (s.rank, s.program)).collect(), slices })
}
