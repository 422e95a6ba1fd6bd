//! PSUM banks by liveness.
//!
//! A tile without an address takes whole banks (NKI starts every PSUM tensor at a
//! bank boundary), `ceil(bytes / bank bytes)` of them; a placed tile takes the
//! banks its bytes cover, and placed tiles sharing a bank count it once. A tile
//! holds its banks over its live interval. When a touch extends a tile's interval
//! from its previous last touch `l` to `t`, the occupancy can only have grown at
//! positions in `(l, t]`, and every tile live at such a position was touched in
//! that window (its interval reaches past `l`), so the check scans the log of
//! touches back to `l` only. Occupancy within the window changes only where an
//! interval starts, so those positions (and `l + 1`) are the ones evaluated.

use super::{OnChip, Site, Tile, plural};
use crate::hw::HwLimits;
use crate::{ErrorKind, NkiError, Result};

/// The bank bookkeeping of one program.
#[derive(Default)]
pub(super) struct Banks {
    /// `(position, tile)` of every touch that moved a PSUM tile's last use, in order.
    log: Vec<(u64, usize)>,
    /// Log length after the last pruning.
    kept: usize,
    /// The most banks live at once so far.
    pub(super) peak: usize,
}

/// The banks of a tile: a count (unplaced) or a set (placed, bit i = bank i).
fn banks_of(t: &Tile, hw: &HwLimits) -> (usize, u64) {
    match t.place {
        None => (hw.psum_banks_for(t.bytes).max(1), 0),
        Some(p) => {
            let (first, last) = (p.byte / hw.psum_bank_bytes, (p.byte + t.bytes.max(1) - 1) / hw.psum_bank_bytes);
            (0, (first..=last).fold(0u64, |m, b| m | (1 << b)))
        }
    }
}

/// Banks held by the tiles `live`.
fn occupancy(tiles: &[Tile], live: &[usize], hw: &HwLimits) -> usize {
    let (count, mask) = live.iter().map(|&i| banks_of(&tiles[i], hw)).fold((0, 0u64), |(c, m), (n, b)| (c + n, m | b));
    count + mask.count_ones() as usize
}

/// How `t` holds banks, for messages: `1 bank` or `bank 3`.
fn describe(t: &Tile, hw: &HwLimits) -> String {
    match banks_of(t, hw) {
        (n, 0) => plural(n, "bank"),
        (_, mask) => {
            let banks: Vec<String> = (0..64).filter(|b| mask & (1 << b) != 0).map(|b| b.to_string()).collect();
            format!("bank{} {}", if banks.len() == 1 { "" } else { "s" }, banks.join(", "))
        }
    }
}

impl Banks {
    /// Records that PSUM tile `t` is touched at `site`; an error when that makes
    /// more banks live at once than the generation has.
    pub(super) fn touch(&mut self, tiles: &mut [Tile], t: usize, site: Site, hw: &HwLimits) -> Result<()> {
        let tile = &mut tiles[t];
        let from = match tile.first {
            None => {
                tile.first = Some(site);
                site.pos
            }
            Some(_) if tile.last >= site.pos => return Ok(()),
            Some(_) => tile.last + 1,
        };
        tile.last = site.pos;
        self.log.push((site.pos, t));
        let mut window: Vec<usize> = self.log.iter().rev().take_while(|e| e.0 >= from).map(|e| e.1).collect();
        window.sort_unstable();
        window.dedup();
        let mut at: Vec<u64> = vec![from];
        at.extend(window.iter().filter_map(|&y| tiles[y].first.map(|f| f.pos)).filter(|&f| f > from && f <= site.pos));
        for q in at {
            let live: Vec<usize> =
                window.iter().copied().filter(|&y| tiles[y].first.is_some_and(|f| f.pos <= q) && tiles[y].last >= q).collect();
            let used = occupancy(tiles, &live, hw);
            self.peak = self.peak.max(used);
            if used > hw.psum_banks {
                return Err(exceeded(tiles, &live, hw));
            }
        }
        self.prune(tiles);
        Ok(())
    }

    /// Drops log entries no future window reaches: windows start after the last
    /// touch of an open tile, so entries up to the earliest such touch are done.
    fn prune(&mut self, tiles: &[Tile]) {
        if self.log.len() < 4096 || self.log.len() < 2 * self.kept {
            return;
        }
        let horizon = tiles.iter().filter(|t| t.open && t.kind == OnChip::Psum && t.first.is_some()).map(|t| t.last).min();
        let done = self.log.partition_point(|e| horizon.is_none_or(|h| e.0 <= h));
        self.log.drain(..done);
        self.kept = self.log.len();
    }
}

/// The capacity error for the tiles `live` at one position: the one first used
/// last needs its banks while the others hold theirs.
fn exceeded(tiles: &[Tile], live: &[usize], hw: &HwLimits) -> NkiError {
    let newest = live.iter().copied().max_by_key(|&i| (tiles[i].first.map(|f| f.pos), i)).unwrap_or_default();
    let others: Vec<usize> = live.iter().copied().filter(|&i| i != newest).collect();
    let (n, held) = (&tiles[newest], occupancy(tiles, &others, hw));
    let list: Vec<String> = others.iter().map(|&i| format!("'{}' ({})", tiles[i].name(), describe(&tiles[i], hw))).collect();
    let first = n.first.map_or_else(String::new, |s| format!(" at {s}"));
    let need = match n.place {
        None => {
            format!("{} ({} B per partition; every PSUM tensor takes whole banks of {} B)", describe(n, hw), n.bytes, hw.psum_bank_bytes)
        }
        Some(p) => format!("{} (address ({}, {}), {} B per partition)", describe(n, hw), p.partition, p.byte, n.bytes),
    };
    NkiError::new(
        ErrorKind::Capacity,
        format!(
            "PSUM capacity exceeded: tensor '{}' needs {need}, but {held} of the {} banks are in use: {}; all are live at \
             once: '{}' is first used{first} while each of the others is used again later (a PSUM tile holds its banks from \
             its first to its last use, and PSUM is not spilled)",
            n.name(),
            hw.psum_banks,
            list.join(", "),
            n.name()
        ),
    )
}
