//! The on-chip memory of one program (SBUF and PSUM), as the compiler allocates it.
//!
//! A tile (an on-chip tensor) holds memory from the first instruction that touches
//! it to the last one: its live interval, in the program's instruction order (a
//! [`Site`]'s `pos`). The emulator runs eagerly and cannot know a tile's last use
//! before the program ends, so every instruction reports what it touches
//! (`MemPool::touch`) and the rules are checked over the intervals as they grow:
//!
//! * PSUM (`psum`): a tile takes whole banks, or the banks its `address=`
//!   covers. When a touch extends a tile's interval, every position it newly
//!   covers is checked: more banks live at once than the generation has is an
//!   error (PSUM is not spilled), raised by the touch that proves the overlap and
//!   naming the tiles live there.
//! * SBUF (`sbuf`): touches are traced, down to the bytes of each partition an
//!   instruction reads or writes. The one error is an instruction whose own
//!   operands exceed a partition; whatever else does not fit is spilled to HBM
//!   and reloaded, as the compiler does. The trace is replayed when a report is
//!   asked for, evicting the span needed furthest in the future, which gives
//!   the liveness peak and the spill traffic `nki profile` counts.
//! * Placed tiles (`arena`): `address=(partition, byte)` pins a tile to fixed
//!   bytes. Tiles whose bytes overlap share them (a write through one is read
//!   through the other), and reading bytes a tile wrote that another tile has
//!   overwritten since is reported as the hazard it is, naming both tiles and
//!   the instructions.
//! * Addresses (`stack`): under [`Allocator::Stack`] every other SBUF tile is
//!   given bytes as a stack allocator gives them, so tiles of consecutive loop
//!   iterations share bytes and the profile makes them wait for each other.

mod arena;
mod psum;
mod sbuf;
mod stack;

pub use sbuf::{Spill, SpillKind};

use crate::hw::HwLimits;
use crate::profile::Region;
use crate::tensor::Storage;
use crate::{Dtype, ErrorKind, NkiError, Result, Tensor};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// On-chip memory kinds that are accounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnChip {
    /// State buffer.
    Sbuf,
    /// Matmul accumulation buffer.
    Psum,
}

impl OnChip {
    fn name(self) -> &'static str {
        match self {
            OnChip::Sbuf => "SBUF",
            OnChip::Psum => "PSUM",
        }
    }
}

/// Where an instruction stands: its position in program order (1 for the first
/// op), its NKI name and, when the kernel was written in the DSL, its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Position in the program's instruction order.
    pub pos: u64,
    /// The NKI name of the instruction.
    pub op: &'static str,
    /// The kernel source line (`file`, `line`) that issued it, if known.
    pub line: Option<(&'static str, u32)>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some((file, line)) => write!(f, "{} ({file}:{line})", self.op),
            None => write!(f, "{} (instruction {})", self.op, self.pos),
        }
    }
}

/// An explicit `address=(partition, byte)` placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// First partition.
    pub partition: usize,
    /// Byte offset within each partition.
    pub byte: usize,
}

/// How the SBUF addresses of tiles without `address=` are chosen, which decides
/// whether tiles of different loop iterations share bytes (and so wait for each
/// other in a profile).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Allocator {
    /// Every tile is a buffer of its own: the compiler's default allocator
    /// multi-buffers loop tiles, as the kernel-optimization tutorial's profiles
    /// show (the next iteration's loads overlap this one's matmuls).
    #[default]
    Default,
    /// The stack allocator the NKI library's design specs recommend: a tile takes
    /// the lowest free bytes when allocated and frees them when dropped, so the
    /// next iteration's tile reuses them and waits for the previous one's
    /// accesses (see the `stack` module).
    Stack,
}

/// One on-chip tensor of the program.
pub(super) struct Tile {
    name: String,
    /// The kernel variable its storage was last bound to (see `Storage::bind`).
    bound: Option<&'static str>,
    shape: Vec<usize>,
    kind: OnChip,
    /// Partitions (dim 0 of the allocation).
    partitions: usize,
    /// Bytes per partition.
    bytes: usize,
    dtype: Dtype,
    place: Option<Place>,
    /// Identity of its storage, and the storage itself for reads through an alias.
    storage_id: u64,
    storage: Weak<Storage>,
    /// The first instruction that touched it and the position of the last one.
    first: Option<Site>,
    last: u64,
    /// Whether a handle still exists (a closed tile is touched no more).
    open: bool,
    /// Its slot in its memory's placement arena (0: not placed).
    slot: u16,
}

impl Tile {
    /// The name messages use: its newest binding, else its allocation's name.
    fn name(&self) -> &str {
        self.bound.unwrap_or(&self.name)
    }

    /// `'name'`, with its placement when it has one.
    fn label(&self) -> String {
        match self.place {
            Some(p) => format!("'{}' (address ({}, {}))", self.name(), p.partition, p.byte),
            None => format!("'{}'", self.name()),
        }
    }
}

/// The bytes `bytes.0..bytes.1` of each partition of its tile a view touches.
#[derive(Clone, Copy, Debug)]
struct Span {
    bytes: (usize, usize),
}

/// One on-chip operand of an instruction.
struct Access<'a> {
    tile: usize,
    view: &'a Tensor,
    span: Span,
    write: bool,
}

#[derive(Default)]
struct State {
    tiles: Vec<Tile>,
    psum: psum::Banks,
    sbuf: sbuf::Trace,
    sbuf_arena: Option<arena::Arena>,
    psum_arena: Option<arena::Arena>,
    /// SBUF addresses under [`Allocator::Stack`].
    stack: stack::Stack,
}

impl State {
    fn arena(&mut self, kind: OnChip) -> &mut Option<arena::Arena> {
        match kind {
            OnChip::Sbuf => &mut self.sbuf_arena,
            OnChip::Psum => &mut self.psum_arena,
        }
    }
}

/// Peak on-chip usage of a program (per partition) and its SBUF spill traffic.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    /// Peak SBUF bytes per partition live at once (before spilling: what the
    /// kernel's tiles need, placed tiles included).
    pub sbuf_peak: usize,
    /// Peak number of PSUM banks live at once.
    pub psum_peak_banks: usize,
    /// The bytes per partition those banks span (`psum_peak_banks` × bank bytes).
    pub psum_peak_bytes: usize,
    /// Bytes the compiler would store from SBUF to HBM to make room (all partitions).
    pub spill_save_bytes: usize,
    /// Bytes it would load back into SBUF before their next use.
    pub spill_reload_bytes: usize,
}

/// The on-chip memory of one program.
pub struct MemPool {
    limits: HwLimits,
    allocator: Allocator,
    state: Mutex<State>,
}

/// A tile's hold on its program's memory; dropped with the tile's storage.
pub struct Lease {
    pool: Arc<MemPool>,
    tile: usize,
    place: Option<(OnChip, Place)>,
}

impl Lease {
    /// Records the kernel variable the tile's storage was bound to, for messages.
    pub(crate) fn bind(&self, var: &'static str) {
        if let Some(t) = self.pool.lock().tiles.get_mut(self.tile) {
            t.bound = Some(var);
        }
    }

    /// The tile's memory and placement: its `address=`, or the bytes the
    /// [`Allocator::Stack`] gave it.
    pub fn placement(&self) -> Option<(OnChip, Place)> {
        self.place
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lease({})", self.tile)
    }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl MemPool {
    /// An empty memory with the capacities of `limits`, placing tiles without
    /// `address=` as `allocator` does.
    pub fn new(limits: HwLimits, allocator: Allocator) -> Arc<MemPool> {
        Arc::new(MemPool { limits, allocator, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the tile `name` of `shape` and `dtype` in `kind` memory, at the
    /// explicit `address` `(partition, byte)` when given (checked against the
    /// memory's size and, for PSUM, the bank boundaries). Nothing is taken yet:
    /// a tile holds memory from the first instruction that touches it.
    pub fn allocate(
        self: &Arc<Self>,
        kind: OnChip,
        name: &str,
        shape: &[usize],
        dtype: Dtype,
        address: Option<(i64, i64)>,
    ) -> Result<Lease> {
        let partitions = shape.first().copied().unwrap_or(1);
        let bytes = shape.iter().skip(1).product::<usize>() * dtype.size_bytes();
        let place = address.map(|a| self.check_place(kind, name, shape, dtype, partitions, bytes, a)).transpose()?;
        let mut st = self.lock();
        let tile = st.tiles.len();
        st.tiles.push(Tile {
            name: name.to_string(),
            bound: None,
            shape: shape.to_vec(),
            kind,
            partitions,
            bytes,
            dtype,
            place,
            storage_id: 0,
            storage: Weak::new(),
            first: None,
            last: 0,
            open: true,
            slot: 0,
        });
        if place.is_some() {
            let width = match kind {
                OnChip::Sbuf => self.limits.sbuf_bytes_per_partition,
                OnChip::Psum => self.limits.psum_bytes_per_partition(),
            };
            let pmax = self.limits.pmax;
            let State { tiles, sbuf_arena, psum_arena, .. } = &mut *st;
            let arena = match kind {
                OnChip::Sbuf => sbuf_arena,
                OnChip::Psum => psum_arena,
            }
            .get_or_insert_with(|| arena::Arena::new(pmax, width));
            let slot = arena.place(tiles, tile);
            tiles[tile].slot = slot;
        }
        let stacked = match (self.allocator, kind, place) {
            (Allocator::Stack, OnChip::Sbuf, Some(p)) => {
                st.stack.hold(tile, p.byte, p.byte + bytes);
                None
            }
            (Allocator::Stack, OnChip::Sbuf, None) => {
                st.stack.take(tile, bytes, self.limits.sbuf_bytes_per_partition).map(|byte| Place { partition: 0, byte })
            }
            _ => None,
        };
        Ok(Lease { pool: Arc::clone(self), tile, place: place.or(stacked).map(|p| (kind, p)) })
    }

    /// Checks an explicit placement: non-negative, inside the memory, and for PSUM
    /// at a bank boundary (the NKI migration guide: "The allocation for PSUM
    /// tensors must start at the beginning of each bank").
    #[allow(clippy::too_many_arguments)]
    fn check_place(
        &self,
        kind: OnChip,
        name: &str,
        shape: &[usize],
        dtype: Dtype,
        partitions: usize,
        bytes: usize,
        (p, b): (i64, i64),
    ) -> Result<Place> {
        let hw = &self.limits;
        let what = format!("{} tensor '{name}' {shape:?} {dtype} at address ({p}, {b})", kind.name());
        let refuse = |rule: String| Err(NkiError::constraint("nl.ndarray", format!("{what}: {rule}")));
        let (Ok(partition), Ok(byte)) = (usize::try_from(p), usize::try_from(b)) else {
            return refuse("the partition and byte offsets of an address must be non-negative".into());
        };
        if partition + partitions > hw.pmax {
            return refuse(format!("its {partitions} partitions from partition {partition} reach past the {} partitions", hw.pmax));
        }
        let width = match kind {
            OnChip::Sbuf => hw.sbuf_bytes_per_partition,
            OnChip::Psum => hw.psum_bytes_per_partition(),
        };
        if kind == OnChip::Psum && byte % hw.psum_bank_bytes != 0 {
            return refuse(format!(
                "a PSUM tensor must start at the beginning of a bank (a byte offset that is a multiple of {} B)",
                hw.psum_bank_bytes
            ));
        }
        if byte + bytes > width {
            return refuse(format!(
                "its {bytes} B per partition from byte {byte} end at byte {}, past the {width} B of a {} partition",
                byte + bytes,
                kind.name()
            ));
        }
        Ok(Place { partition, byte })
    }

    /// Ties `lease`'s tile to its storage, for reads of placed tiles that alias it.
    pub(crate) fn bind(&self, lease: &Lease, st: &Arc<Storage>) {
        let mut s = self.lock();
        if let Some(t) = s.tiles.get_mut(lease.tile) {
            t.storage = Arc::downgrade(st);
            t.storage_id = st.id;
        }
    }

    fn release(&self, tile: usize) {
        let mut st = self.lock();
        let Some(t) = st.tiles.get_mut(tile) else { return };
        t.open = false;
        let (kind, slot) = (t.kind, t.slot);
        if kind == OnChip::Sbuf && self.allocator == Allocator::Stack {
            st.stack.release(tile);
        }
        if slot != 0
            && let Some(a) = st.arena(kind)
        {
            a.release(slot);
        }
    }

    /// The tile of an on-chip view of this program, if it is one.
    fn tile_of(self: &Arc<Self>, t: &Tensor) -> Option<usize> {
        let lease = t.storage().lease()?;
        Arc::ptr_eq(&lease.pool, self).then_some(lease.tile)
    }

    /// The bytes per partition of its tile that `view` touches.
    fn span(tile: &Tile, view: &Tensor) -> Span {
        let whole = Span { bytes: (0, tile.bytes) };
        if view.storage().is_indirection() {
            return whole;
        }
        let r = Region::in_storage(view);
        let size = view.dtype().size_bytes() as isize;
        let clamp = |v: isize, hi: usize| v.clamp(0, hi as isize) as usize;
        Span { bytes: (clamp(r.cols.0 * size, tile.bytes), clamp((r.cols.1 + 1) * size, tile.bytes)) }
    }

    /// Records that the instruction at `site` reads `reads` and writes `writes`:
    /// checks the reads of placed tiles (pulling in what aliasing tiles wrote, or
    /// reporting a clobber), extends the live intervals (PSUM capacity is checked
    /// here), checks that its SBUF operands fit together, and marks the bytes it
    /// writes. HBM operands are ignored.
    pub(crate) fn touch(self: &Arc<Self>, site: Site, reads: &[&Tensor], writes: &[&Tensor]) -> Result<()> {
        let tagged = reads.iter().map(|t| (*t, false)).chain(writes.iter().map(|t| (*t, true)));
        let on_chip: Vec<(&Tensor, bool, usize)> =
            tagged.filter(|(t, _)| t.buffer().is_on_chip()).filter_map(|(t, w)| Some((t, w, self.tile_of(t)?))).collect();
        if on_chip.is_empty() {
            return Ok(());
        }
        let mut guard = self.lock();
        let st = &mut *guard;
        let accesses: Vec<Access<'_>> =
            on_chip.iter().map(|&(view, write, tile)| Access { tile, view, span: Self::span(&st.tiles[tile], view), write }).collect();
        for a in accesses.iter().filter(|a| !a.write) {
            let tile = &st.tiles[a.tile];
            if tile.slot != 0
                && let Some(arena) = match tile.kind {
                    OnChip::Sbuf => st.sbuf_arena.as_mut(),
                    OnChip::Psum => st.psum_arena.as_mut(),
                }
            {
                arena.read(&st.tiles, a.tile, a.view, &site)?;
            }
        }
        let mut psum_tiles: Vec<usize> = accesses.iter().filter(|a| st.tiles[a.tile].kind == OnChip::Psum).map(|a| a.tile).collect();
        psum_tiles.sort_unstable();
        psum_tiles.dedup();
        for t in psum_tiles {
            st.psum.touch(&mut st.tiles, t, site, &self.limits)?;
        }
        self.touch_sbuf(st, &site, &accesses)?;
        for a in accesses.iter().filter(|a| a.write) {
            let tile = &st.tiles[a.tile];
            if tile.slot != 0
                && let Some(arena) = match tile.kind {
                    OnChip::Sbuf => st.sbuf_arena.as_mut(),
                    OnChip::Psum => st.psum_arena.as_mut(),
                }
            {
                arena.write(tile, a.view, site);
            }
        }
        Ok(())
    }

    /// Traces the SBUF operands and checks that they fit in a partition together.
    fn touch_sbuf(&self, st: &mut State, site: &Site, accesses: &[Access<'_>]) -> Result<()> {
        // Per tile, the union of the instruction's spans (its bounding bytes).
        let mut per_tile: Vec<(usize, (usize, usize), bool)> = Vec::new();
        for a in accesses.iter().filter(|a| st.tiles[a.tile].kind == OnChip::Sbuf) {
            match per_tile.iter_mut().find(|e| e.0 == a.tile) {
                Some(e) => {
                    e.1 = (e.1.0.min(a.span.bytes.0), e.1.1.max(a.span.bytes.1));
                    e.2 |= a.write;
                }
                None => per_tile.push((a.tile, a.span.bytes, a.write)),
            }
        }
        if per_tile.is_empty() {
            return Ok(());
        }
        let need: usize = per_tile.iter().map(|e| e.1.1 - e.1.0).sum();
        let cap = self.limits.sbuf_bytes_per_partition;
        if need > cap {
            let parts: Vec<String> = per_tile.iter().map(|e| format!("{} {} B", st.tiles[e.0].label(), e.1.1 - e.1.0)).collect();
            return Err(NkiError::new(
                ErrorKind::Capacity,
                format!(
                    "SBUF capacity exceeded: {site} works on {need} B per partition of SBUF at once ({}), more than the {cap} B a \
                     partition holds: one instruction's operands must be in SBUF together (the compiler spills other tiles, \
                     not these); split the instruction into smaller tiles",
                    parts.join(", ")
                ),
            ));
        }
        for (tile, bytes, write) in per_tile {
            let t = &mut st.tiles[tile];
            if t.first.is_none() {
                t.first = Some(*site);
            }
            t.last = site.pos;
            st.sbuf.record(site.pos, tile, bytes, write);
        }
        Ok(())
    }

    /// Peak usage so far: the PSUM banks and the SBUF liveness peak, with the
    /// spill traffic of the trace replayed against the SBUF capacity.
    pub fn report(&self) -> MemoryReport {
        self.summary().0
    }

    /// The report, and the spill saves and reloads the compiler would insert (in
    /// program order).
    pub fn summary(&self) -> (MemoryReport, Vec<Spill>) {
        let st = self.lock();
        let plan = st.sbuf.plan(&st.tiles, self.limits.sbuf_bytes_per_partition);
        let report = MemoryReport {
            sbuf_peak: plan.peak,
            psum_peak_banks: st.psum.peak,
            psum_peak_bytes: st.psum.peak * self.limits.psum_bank_bytes,
            spill_save_bytes: plan.save_bytes,
            spill_reload_bytes: plan.reload_bytes,
        };
        (report, plan.spills)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.release(self.tile);
    }
}
