//! Tiles placed with `address=`: who owns each byte, alias reads and clobbers.
//!
//! Each placed tile keeps its own cells, and the arena records, for every byte
//! of the memory (partition × byte), the placed tile that wrote it last. A read
//! of a placed tile whose bytes another tile owns is either
//!
//! * an alias read, when the reader never wrote those bytes itself: its cells are
//!   refreshed from the owner's, through the bytes when the dtypes differ (a
//!   write through one tensor is read through the other); or
//! * a clobber, when the reader wrote them and another tile wrote over them
//!   since: the reader's data is gone, which is reported with both tiles and
//!   both writes.
//!
//! Owners are slots of a table; a slot whose tile is dropped keeps its bytes (so
//! a clobber by a dropped tile is still reported) until the table is full and
//! the slot is reused, its stale bytes cleared then.

use super::{Site, Tile};
use crate::tensor::{bytes_of_cell, cell_of_bytes};
use crate::{ErrorKind, NkiError, Result, Tensor};
use std::collections::VecDeque;

/// Largest slot number (slot 0 means "no owner").
const MAX_SLOT: usize = u16::MAX as usize;

struct Slot {
    tile: usize,
    /// Per byte of the tile (partition-major): whether the tile wrote it.
    written: Vec<bool>,
    /// The tile's latest write.
    last_write: Option<Site>,
}

/// The placed tiles of one memory (SBUF or PSUM) of a program.
pub(super) struct Arena {
    width: usize,
    owner: Vec<u16>,
    /// `slots[i - 1]` is slot `i`.
    slots: Vec<Slot>,
    dead: VecDeque<u16>,
}

/// A run of bytes of one partition of a tile: partition `p`, bytes `lo..hi`.
struct Seg {
    p: usize,
    lo: usize,
    hi: usize,
}

/// The byte runs of `tile` that `view` touches, exactly.
fn segments(tile: &Tile, view: &Tensor) -> Vec<Seg> {
    let st = view.storage();
    if st.is_indirection() {
        return (0..tile.partitions).map(|p| Seg { p, lo: 0, hi: tile.bytes }).collect();
    }
    let size = view.dtype().size_bytes();
    let row = (tile.bytes / size).max(1) as isize;
    let mut out: Vec<Seg> = Vec::new();
    let mut push = |cell: isize, n: usize| {
        let (p, c) = (cell.div_euclid(row) as usize, cell.rem_euclid(row) as usize);
        let (lo, hi) = (c * size, (c + n) * size);
        match out.last_mut() {
            Some(s) if s.p == p && s.hi == lo => s.hi = hi,
            _ => out.push(Seg { p, lo, hi }),
        }
    };
    view.layout().for_each_run(|start, n, step| {
        if step == 1 {
            // A contiguous run may cross partitions: split it at each row end.
            let (mut cell, mut left) = (start, n);
            while left > 0 {
                let room = (row - cell.rem_euclid(row)) as usize;
                let k = room.min(left);
                push(cell, k);
                cell += k as isize;
                left -= k;
            }
        } else {
            for i in 0..n as isize {
                push(start + i * step, 1);
            }
        }
    });
    out.retain(|s| s.p < tile.partitions && s.hi <= tile.bytes);
    out
}

impl Arena {
    /// An empty arena of `pmax` partitions of `width` bytes.
    pub(super) fn new(pmax: usize, width: usize) -> Arena {
        Arena { width, owner: vec![0; pmax * width], slots: Vec::new(), dead: VecDeque::new() }
    }

    /// The arena index of byte `b` of partition `p` of `tile`.
    fn at(&self, tile: &Tile, p: usize, b: usize) -> usize {
        let place = tile.place.expect("arena tiles are placed");
        (place.partition + p) * self.width + place.byte + b
    }

    /// A slot for the placed tile `t`: a new one, or when the table is full the
    /// slot of the tile dropped longest ago, its bytes cleared.
    pub(super) fn place(&mut self, tiles: &[Tile], t: usize) -> u16 {
        let fresh = Slot { tile: t, written: vec![false; tiles[t].partitions * tiles[t].bytes], last_write: None };
        if self.slots.len() < MAX_SLOT || self.dead.is_empty() {
            if self.slots.len() < MAX_SLOT {
                self.slots.push(fresh);
                return self.slots.len() as u16;
            }
            // Every slot is live: share the last one (its clobbers go unreported).
            return MAX_SLOT as u16;
        }
        let slot = self.dead.pop_front().expect("a dead slot");
        let old = &tiles[self.slots[usize::from(slot) - 1].tile];
        for p in 0..old.partitions {
            let i = self.at(old, p, 0);
            self.owner[i..i + old.bytes].iter_mut().filter(|o| **o == slot).for_each(|o| *o = 0);
        }
        self.slots[usize::from(slot) - 1] = fresh;
        slot
    }

    /// Marks `slot`'s tile dropped: its bytes keep naming it until the slot is reused.
    pub(super) fn release(&mut self, slot: u16) {
        if let Some(s) = self.slots.get_mut(usize::from(slot) - 1) {
            s.written = Vec::new();
            self.dead.push_back(slot);
        }
    }

    /// Records that `tile` writes the bytes `view` touches at `site`.
    pub(super) fn write(&mut self, tile: &Tile, view: &Tensor, site: Site) {
        let slot = tile.slot;
        for s in segments(tile, view) {
            let i = self.at(tile, s.p, s.lo);
            self.owner[i..i + s.hi - s.lo].fill(slot);
            let w = s.p * tile.bytes;
            if let Some(written) = self.slots[usize::from(slot) - 1].written.get_mut(w + s.lo..w + s.hi) {
                written.fill(true);
            }
        }
        self.slots[usize::from(slot) - 1].last_write = Some(site);
    }

    /// Checks the read of the bytes `view` touches of tile `a`: refreshes the
    /// bytes other tiles wrote and `a` never did, and reports a clobber of bytes
    /// `a` wrote.
    pub(super) fn read(&mut self, tiles: &[Tile], a: usize, view: &Tensor, site: &Site) -> Result<()> {
        let tile = &tiles[a];
        let slot = tile.slot;
        let mut foreign: Vec<(usize, usize)> = Vec::new();
        for s in segments(tile, view) {
            let i = self.at(tile, s.p, s.lo);
            let owners = &self.owner[i..i + s.hi - s.lo];
            if owners.iter().all(|&o| o == slot || o == 0) {
                continue;
            }
            let written = &self.slots[usize::from(slot) - 1].written;
            for (k, &o) in owners.iter().enumerate() {
                if o == slot || o == 0 {
                    continue;
                }
                let b = s.lo + k;
                if written.get(s.p * tile.bytes + b).copied().unwrap_or(false) {
                    return Err(self.clobber(tiles, a, o, site));
                }
                foreign.push((s.p, b));
            }
        }
        if !foreign.is_empty() {
            self.refresh(tiles, a, &foreign);
        }
        Ok(())
    }

    /// Rebuilds the cells of `a` holding the bytes `foreign` from their owners' cells.
    fn refresh(&self, tiles: &[Tile], a: usize, foreign: &[(usize, usize)]) {
        let tile = &tiles[a];
        let Some(st) = tile.storage.upgrade() else { return };
        let size = tile.dtype.size_bytes();
        let row = tile.bytes / size;
        let mut cells: Vec<(usize, usize)> = foreign.iter().map(|&(p, b)| (p, b / size)).collect();
        cells.dedup();
        let mine = st.read_cells();
        let mut updates: Vec<(usize, f32, bool)> = Vec::with_capacity(cells.len());
        for (p, c) in cells {
            let index = p * row + c;
            let mut bytes = bytes_of_cell(tile.dtype, mine[index]);
            let mut lost = false;
            for (k, byte) in bytes.iter_mut().enumerate() {
                let o = self.owner[self.at(tile, p, c * size + k)];
                if o == tile.slot || o == 0 {
                    continue;
                }
                match self.byte_of(tiles, o, self.at(tile, p, c * size + k)) {
                    Some(v) => *byte = v,
                    None => lost = true,
                }
            }
            let value = if lost { crate::tensor::Storage::uninit_cell(tile.dtype) } else { cell_of_bytes(tile.dtype, &bytes) };
            updates.push((index, value, lost));
        }
        drop(mine);
        let mut w = st.write_cells();
        for &(i, v, _) in &updates {
            if let Some(c) = w.get_mut(i) {
                *c = v;
            }
        }
        drop(w);
        // Bytes another tile wrote are written; those of a tile gone are not.
        updates.iter().filter(|u| !u.2).for_each(|&(i, ..)| st.mark_cell_written(i));
    }

    /// The value of arena byte `at` as slot `o`'s tile holds it (`None` once that tile is dropped).
    fn byte_of(&self, tiles: &[Tile], o: u16, at: usize) -> Option<u8> {
        let t = &tiles[self.slots[usize::from(o) - 1].tile];
        let st = t.storage.upgrade()?;
        let place = t.place?;
        let (p, b) = (at / self.width - place.partition, at % self.width - place.byte);
        let size = t.dtype.size_bytes();
        let cell = *st.read_cells().get(p * (t.bytes / size) + b / size)?;
        bytes_of_cell(t.dtype, cell).get(b % size).copied()
    }

    fn clobber(&self, tiles: &[Tile], a: usize, o: u16, site: &Site) -> NkiError {
        let (ta, so) = (&tiles[a], &self.slots[usize::from(o) - 1]);
        let tb = &tiles[so.tile];
        let mine = self.slots[usize::from(ta.slot) - 1].last_write.map_or_else(|| "earlier".to_string(), |s| format!("at {s}"));
        let theirs = so.last_write.map_or_else(|| "later".to_string(), |s| format!("at {s}"));
        NkiError::new(
            ErrorKind::Hazard,
            format!(
                "{site} reads {} {:?} {}, but bytes it wrote ({mine}) were overwritten through {} {:?} {} ({theirs}): \
                 tiles whose addresses overlap share their bytes, so the second write clobbered data the first tile still \
                 needed; give them disjoint addresses or finish reading {} before writing {}",
                ta.label(),
                ta.shape,
                ta.dtype,
                tb.label(),
                tb.shape,
                tb.dtype,
                ta.label(),
                tb.label()
            ),
        )
    }
}
