//! SBUF by liveness, with the compiler's spills.
//!
//! Every instruction's SBUF operands are traced as spans of bytes per partition
//! of their tiles. A tile's span is split at the boundaries of every span
//! instructions touched, giving the *units* the model keeps or spills: a tile
//! only ever used whole is one unit, and a tensor holding what a kernel could
//! keep as a list of tiles (each instruction reading one of them) is one unit per
//! tile. A unit is live from its first to its last touch.
//!
//! The replay ([`Trace::plan`]) walks the trace in program order with the units
//! an instruction needs resident. When they do not fit, the resident unit whose
//! next use is furthest away is evicted (the optimal choice for a known future,
//! Belady's): stored to HBM if written since it was last loaded, and reloaded
//! before its next use. A unit is freed after its last use. Tiles placed with
//! `address=` hold their bytes over their live interval and are never spilled.

use super::Tile;
use crate::Dtype;
use std::collections::BTreeSet;
use std::ops::Range;

/// A spill the compiler would insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpillKind {
    /// SBUF to HBM, to make room.
    Save,
    /// HBM back to SBUF, before the next use.
    Reload,
}

/// One spill save or reload of a span of a tile, issued before the instruction at
/// position `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spill {
    /// Position of the instruction it precedes.
    pub at: u64,
    /// Save or reload.
    pub kind: SpillKind,
    /// Identity of the tile's storage.
    pub storage: u64,
    /// The tile's dtype.
    pub dtype: Dtype,
    /// Partitions moved.
    pub partitions: usize,
    /// Bytes `lo..hi` of each partition moved.
    pub bytes: (usize, usize),
}

impl Spill {
    /// Bytes moved over all partitions.
    pub fn total_bytes(&self) -> usize {
        self.partitions * (self.bytes.1 - self.bytes.0)
    }
}

/// One traced touch: a tile's bytes `lo..hi` (per partition) at position `pos`.
#[derive(Clone, Copy)]
struct Touch {
    pos: u64,
    tile: u32,
    lo: u32,
    hi: u32,
    write: bool,
}

/// The SBUF touches of one program, in order.
#[derive(Default)]
pub(super) struct Trace {
    touches: Vec<Touch>,
}

/// What the replay found.
#[derive(Default)]
pub(super) struct Plan {
    /// Most bytes per partition live at once (before spilling).
    pub(super) peak: usize,
    pub(super) spills: Vec<Spill>,
    pub(super) save_bytes: usize,
    pub(super) reload_bytes: usize,
}

/// A span of a tile kept or spilled as a whole.
struct Unit {
    tile: usize,
    bytes: (usize, usize),
    /// Its touches: position and whether it writes.
    uses: Vec<(u64, bool)>,
}

/// Replay state of a unit.
#[derive(Clone, Copy, Default)]
struct Held {
    next: usize,
    resident: bool,
    /// Written since it was last loaded (a save must store it).
    dirty: bool,
    /// Has a copy in HBM (a reload can restore it).
    saved: bool,
}

impl Trace {
    /// Records that the instruction at `pos` touches bytes `bytes` of `tile`.
    pub(super) fn record(&mut self, pos: u64, tile: usize, bytes: (usize, usize), write: bool) {
        if bytes.1 <= bytes.0 {
            return;
        }
        self.touches.push(Touch { pos, tile: tile as u32, lo: bytes.0 as u32, hi: bytes.1 as u32, write });
    }

    /// The units of every tile and their uses, in program order.
    fn units(&self, tiles: &[Tile]) -> (Vec<Unit>, Vec<Range<usize>>) {
        // Per tile: the boundaries of its touched spans.
        let mut cuts: Vec<Vec<u32>> = vec![Vec::new(); tiles.len()];
        for t in &self.touches {
            cuts[t.tile as usize].extend([t.lo, t.hi]);
        }
        let mut units: Vec<Unit> = Vec::new();
        let mut first_unit = vec![0usize; tiles.len()];
        for (tile, c) in cuts.iter_mut().enumerate() {
            c.sort_unstable();
            c.dedup();
            first_unit[tile] = units.len();
            units.extend(c.windows(2).map(|w| Unit { tile, bytes: (w[0] as usize, w[1] as usize), uses: Vec::new() }));
        }
        // Per touch: the units it covers, a range since a tile's units are numbered
        // in a row (a unit between two touched spans that no touch covers keeps no
        // uses and never becomes live).
        let mut covered: Vec<Range<usize>> = Vec::with_capacity(self.touches.len());
        for t in &self.touches {
            let tile = t.tile as usize;
            let c = &cuts[tile];
            let (a, b) = (c.partition_point(|&x| x < t.lo), c.partition_point(|&x| x < t.hi));
            let ids = first_unit[tile] + a..first_unit[tile] + b;
            for u in ids.clone() {
                match units[u].uses.last_mut() {
                    Some(last) if last.0 == t.pos => last.1 |= t.write,
                    _ => units[u].uses.push((t.pos, t.write)),
                }
            }
            covered.push(ids);
        }
        (units, covered)
    }

    /// Replays the trace against `cap` bytes per partition.
    pub(super) fn plan(&self, tiles: &[Tile], cap: usize) -> Plan {
        let (units, covered) = self.units(tiles);
        let size = |u: &Unit| u.bytes.1 - u.bytes.0;
        let placed = |u: &Unit| tiles[u.tile].place.is_some();
        let mut plan = Plan::default();
        // Liveness peak: +bytes at a unit's first use, -bytes after its last.
        let mut events: Vec<(u64, isize)> = Vec::new();
        for u in units.iter().filter(|u| !u.uses.is_empty()) {
            events.push((u.uses[0].0, size(u) as isize));
            events.push((u.uses[u.uses.len() - 1].0 + 1, -(size(u) as isize)));
        }
        events.sort_unstable();
        let mut live = 0isize;
        for (i, &(pos, d)) in events.iter().enumerate() {
            live += d;
            if events.get(i + 1).is_none_or(|n| n.0 != pos) {
                plan.peak = plan.peak.max(live.max(0) as usize);
            }
        }
        // The replay.
        let mut held = vec![Held::default(); units.len()];
        let mut used = 0usize;
        // Resident spillable units by (next use, unit).
        let mut by_next: BTreeSet<(u64, usize)> = BTreeSet::new();
        let next_use = |u: usize, h: &Held| units[u].uses.get(h.next).map(|x| x.0);
        let mut i = 0;
        while i < self.touches.len() {
            let pos = self.touches[i].pos;
            let mut needed: Vec<usize> = Vec::new();
            while i < self.touches.len() && self.touches[i].pos == pos {
                needed.extend(covered[i].clone());
                i += 1;
            }
            needed.sort_unstable();
            needed.dedup();
            for &u in &needed {
                let h = &mut held[u];
                if h.resident {
                    continue;
                }
                if h.saved && !placed(&units[u]) {
                    plan.spills.push(spill(&units[u], tiles, pos, SpillKind::Reload));
                }
                h.resident = true;
                used += size(&units[u]);
            }
            // Make room: evict the unit needed furthest in the future.
            while used > cap {
                let Some(&(next, victim)) = by_next.last() else { break };
                if next <= pos {
                    break;
                }
                by_next.remove(&(next, victim));
                let h = &mut held[victim];
                if h.dirty || !h.saved {
                    plan.spills.push(spill(&units[victim], tiles, pos, SpillKind::Save));
                }
                (h.resident, h.dirty, h.saved) = (false, false, true);
                used -= size(&units[victim]);
            }
            for &u in &needed {
                if let Some(n) = next_use(u, &held[u]) {
                    by_next.remove(&(n, u));
                }
                let h = &mut held[u];
                h.dirty |= units[u].uses[h.next].1;
                h.next += 1;
                match next_use(u, &held[u]) {
                    Some(n) if !placed(&units[u]) => {
                        by_next.insert((n, u));
                    }
                    Some(_) => {}
                    None => {
                        held[u].resident = false;
                        used -= size(&units[u]);
                    }
                }
            }
        }
        for s in &plan.spills {
            match s.kind {
                SpillKind::Save => plan.save_bytes += s.total_bytes(),
                SpillKind::Reload => plan.reload_bytes += s.total_bytes(),
            }
        }
        plan
    }
}

fn spill(u: &Unit, tiles: &[Tile], at: u64, kind: SpillKind) -> Spill {
    let t = &tiles[u.tile];
    Spill { at, kind, storage: t.storage_id, dtype: t.dtype, partitions: t.partitions, bytes: u.bytes }
}
