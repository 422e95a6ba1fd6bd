"""The on-chip memory of one program (SBUF and PSUM), as the compiler allocates it.

The same model as the Rust emulator's (`nki-core/src/emulator/memory`; the
choices and their evidence are in SEMANTICS.md):

* A tile (an on-chip tensor) holds memory from the first instruction that
  touches it to the last one: its live interval, in the program's instruction
  order. Every read or write of a tile's cells is a touch at the current
  instruction (`Memory.clock`).
* PSUM: a tile takes whole banks (`ceil(bytes / bank bytes)`), or the banks its
  `address=` covers (placed tiles sharing a bank count it once). When a touch
  extends a tile's interval from its last touch `l` to `t`, the positions in
  `(l, t]` are checked: more banks live at once than the generation has is an
  error (PSUM is not spilled) naming the tiles live there. Every tile live at
  such a position was touched in that window, so only the log back to `l` is
  scanned, at the positions where an interval starts.
* SBUF: the bytes one instruction touches must fit a partition together; other
  overflows are what the compiler spills (the Rust profiler counts them; this
  executor has no timeline, so it only enforces the per-instruction limit).
* Placed tiles: `address=(partition, byte)` pins a tile to fixed bytes of the
  memory. Each placed tile keeps its own cells, and an arena records which tile
  wrote each byte last. Reading bytes another tile owns is an alias read when
  the reader never wrote them (its cells are refreshed from the owner's, through
  the bytes when the dtypes differ), and a clobber hazard when it did (an error
  naming both tiles and both writes).
"""

import math
import os
import sys
import weakref
from collections import deque

import numpy as np

from .errors import NkiError

_HERE = os.path.dirname(os.path.abspath(__file__))
_MAX_SLOT = np.iinfo(np.uint16).max


def _plural(n, what):
    return f"{n} {what}{'' if n == 1 else 's'}"


def kernel_line():
    """(file name, line) of the innermost caller outside the executor, or None."""
    f = sys._getframe(1)
    while f is not None:
        if not os.path.abspath(f.f_code.co_filename).startswith(_HERE):
            return os.path.basename(f.f_code.co_filename), f.f_lineno
        f = f.f_back
    return None


class Grid:
    """The cells of a partition-major view as a (partitions, elements) index array,
    whose element columns are the same in every partition."""

    __slots__ = ("cells",)

    def __init__(self, cells):
        self.cells = cells


class Site:
    """An instruction: its position in program order, its NKI name and kernel line."""

    __slots__ = ("pos", "op", "line")

    def __init__(self, pos, op, line):
        self.pos, self.op, self.line = pos, op, line

    def __str__(self):
        where = f"{self.line[0]}:{self.line[1]}" if self.line else f"instruction {self.pos}"
        return f"{self.op or 'an access'} ({where})"


class Tile:
    """One on-chip tensor of a program."""

    def __init__(self, memory, storage, place):
        self.memory = memory
        self.name = storage.name
        self.shape = storage.shape
        self.dtype = storage.dtype
        self.psum = storage.buffer.label == "PSUM"
        self.partitions = storage.shape[0]
        self.bytes = math.prod(storage.shape[1:]) * storage.dtype.size
        self.place = place
        self.storage = weakref.ref(storage)
        self.first = None
        self.last = 0
        self.open = True
        self.slot = 0
        self.written = None
        self.last_write = None

    def label(self):
        if self.place is None:
            return f"'{self.name}'"
        return f"'{self.name}' (address ({self.place[0]}, {self.place[1]}))"

    def banks(self, hw):
        """(count, bank mask) this tile holds."""
        if self.place is None:
            return max(-(-self.bytes // hw.psum_bank_bytes), 1), 0
        first = self.place[1] // hw.psum_bank_bytes
        last = (self.place[1] + max(self.bytes, 1) - 1) // hw.psum_bank_bytes
        return 0, sum(1 << b for b in range(first, last + 1))

    def describe_banks(self, hw):
        count, mask = self.banks(hw)
        if not mask:
            return _plural(count, "bank")
        banks = [str(b) for b in range(64) if mask >> b & 1]
        return f"bank{'s' if len(banks) > 1 else ''} {', '.join(banks)}"

    def close(self):
        """The tile's storage is gone: no more touches; its arena bytes keep naming it."""
        self.open = False
        if self.slot:
            self.memory.arena(self.psum).release(self.slot)


class Arena:
    """Which placed tile wrote each byte (partition x byte) of one memory last."""

    def __init__(self, pmax, width):
        self.width = width
        self.owner = np.zeros((pmax, width), dtype=np.uint16)
        self.slots = [None]
        self.dead = deque()

    def place(self, tile):
        """A slot for `tile`: a new one, or the one dropped longest ago (its bytes cleared)."""
        if len(self.slots) <= _MAX_SLOT:
            self.slots.append(tile)
            return len(self.slots) - 1
        if not self.dead:
            return _MAX_SLOT  # every slot is live: share the last (its clobbers go unreported)
        slot = self.dead.popleft()
        old = self.slots[slot]
        (p, b) = old.place
        region = self.owner[p:p + old.partitions, b:b + old.bytes]
        region[region == slot] = 0
        self.slots[slot] = tile
        return slot

    def release(self, slot):
        self.dead.append(slot)


class Memory:
    """The SBUF and PSUM of one program."""

    def __init__(self, hw):
        self.hw = hw
        self.clock = 0
        self.op = None
        self.psum_peak = 0
        self._log = []
        self._kept = 0
        self._tiles = []
        self._arenas = {}
        self._lines = {}
        self._instr = (0, {})

    # -- positions and sites ---------------------------------------------------------------

    def begin(self, op):
        """A new instruction `op` starts."""
        self.clock += 1
        self.op = op

    def site(self):
        """The current instruction, its kernel line found once per position."""
        line = self._lines.get(self.clock)
        if line is None:
            line = self._lines[self.clock] = kernel_line() or ()
        return Site(self.clock, self.op, line or None)

    # -- allocation --------------------------------------------------------------------------

    def arena(self, psum):
        if psum not in self._arenas:
            width = self.hw.psum_banks * self.hw.psum_bank_bytes if psum else self.hw.sbuf_partition_bytes
            self._arenas[psum] = Arena(self.hw.pmax, width)
        return self._arenas[psum]

    def allocate(self, storage, address):
        """The tile of on-chip `storage`, placed at `address` when given (checked)."""
        place = None if address is None else self._check_place(storage, address)
        tile = Tile(self, storage, place)
        self._tiles.append(tile)
        if place is not None:
            tile.slot = self.arena(tile.psum).place(tile)
            tile.written = np.zeros((tile.partitions, tile.bytes), dtype=bool)
        return tile

    def _check_place(self, storage, address):
        hw = self.hw
        try:
            p, b = (int(a) for a in address)
        except (TypeError, ValueError):
            raise NkiError("nl.ndarray", f"address of '{storage.name}' must be a (partition, byte) pair of ints, got "
                                         f"{address!r}") from None
        label = storage.buffer.label
        what = f"{label} tensor '{storage.name}' {list(storage.shape)} {storage.dtype.name} at address ({p}, {b})"
        partitions = storage.shape[0]
        nbytes = math.prod(storage.shape[1:]) * storage.dtype.size
        if p < 0 or b < 0:
            raise NkiError("nl.ndarray", f"{what}: the partition and byte offsets of an address must be non-negative")
        if p + partitions > hw.pmax:
            raise NkiError("nl.ndarray", f"{what}: its {partitions} partitions from partition {p} reach past the "
                                         f"{hw.pmax} partitions")
        psum = label == "PSUM"
        width = hw.psum_banks * hw.psum_bank_bytes if psum else hw.sbuf_partition_bytes
        if psum and b % hw.psum_bank_bytes:
            raise NkiError("nl.ndarray", f"{what}: a PSUM tensor must start at the beginning of a bank (a byte offset "
                                         f"that is a multiple of {hw.psum_bank_bytes} B)")
        if b + nbytes > width:
            raise NkiError("nl.ndarray", f"{what}: its {nbytes} B per partition from byte {b} end at byte "
                                         f"{b + nbytes}, past the {width} B of a {label} partition")
        return p, b

    # -- touches -----------------------------------------------------------------------------

    def touch(self, tile, idx, write, size, row):
        """Instruction `self.op` reads (or writes) the cells `idx` of `tile`, cells of
        `size` bytes in rows of `row` cells (the tile's own, or a byte view's). An
        `idx` of (partitions, elements) of a partition-major view (`Grid`) is used
        by its first row and column: the same columns in every partition."""
        grid = isinstance(idx, Grid)
        if grid:
            rows, cols = idx.cells[:, 0] // row, idx.cells[0] % row
        else:
            cells = np.asarray(idx).reshape(-1)
            if cells.size == 0:
                return
            rows, cols = np.divmod(cells, row) if tile.slot else (None, None)
        if tile.slot and not write:
            self._read_placed(tile, rows, cols, size, grid)
        if tile.psum:
            self._touch_psum(tile)
        else:
            self._touch_sbuf(tile, *(c * size for c in self._columns(cols, cells if not grid else None, row)))
        if tile.slot and write:
            self._write_placed(tile, rows, cols, size, grid)

    @staticmethod
    def _columns(cols, cells, row):
        """(first, last + 1) column touched: of `cols`, or of the flat `cells`."""
        if cols is not None:
            return int(cols.min()), int(cols.max()) + 1
        lo, hi = int(cells.min()), int(cells.max())
        if lo // row == hi // row:
            return lo % row, hi % row + 1
        r = cells % row
        return int(r.min()), int(r.max()) + 1

    def _touch_sbuf(self, tile, lo, hi):
        """Checks that the SBUF bytes the current instruction touches fit a partition."""
        pos, spans = self._instr
        if pos != self.clock:
            spans = {}
            self._instr = (self.clock, spans)
        key = id(tile)
        old = spans.get(key)
        spans[key] = (tile, (lo, hi) if old is None else (min(old[1][0], lo), max(old[1][1], hi)))
        if tile.first is None:
            tile.first = self.site()
        tile.last = self.clock
        need = sum(h - l for _, (l, h) in spans.values())
        cap = self.hw.sbuf_partition_bytes
        if need > cap:
            parts = ", ".join(f"{t.label()} {h - l} B" for t, (l, h) in spans.values())
            raise NkiError(None, f"SBUF capacity exceeded: {self.site()} works on {need} B per partition of SBUF at "
                                 f"once ({parts}), more than the {cap} B a partition holds: one instruction's operands "
                                 "must be in SBUF together (the compiler spills other tiles, not these); split the "
                                 "instruction into smaller tiles")

    def _touch_psum(self, tile):
        """Extends `tile`'s live interval to the current instruction and checks the banks."""
        now = self.clock
        if tile.first is None:
            tile.first = self.site()
            start = now
        elif tile.last >= now:
            return
        else:
            start = tile.last + 1
        tile.last = now
        self._log.append((now, tile))
        window = {}
        for pos, t in reversed(self._log):
            if pos < start:
                break
            window[id(t)] = t
        window = list(window.values())
        at = [start] + [t.first.pos for t in window if start < t.first.pos <= now]
        for q in at:
            live = [t for t in window if t.first.pos <= q <= t.last]
            used = self._banks(live)
            self.psum_peak = max(self.psum_peak, used)
            if used > self.hw.psum_banks:
                raise self._exceeded(live)
        self._prune()

    def _banks(self, live):
        count, mask = 0, 0
        for t in live:
            c, m = t.banks(self.hw)
            count, mask = count + c, mask | m
        return count + bin(mask).count("1")

    def _prune(self):
        """Drops log entries no later window reaches (up to the earliest last touch of an open tile)."""
        if len(self._log) < 4096 or len(self._log) < 2 * self._kept:
            return
        open_lasts = [t.last for t in self._tiles if t.open and t.psum and t.first is not None]
        horizon = min(open_lasts) if open_lasts else None
        self._log = [e for e in self._log if horizon is not None and e[0] > horizon]
        self._kept = len(self._log)

    def _exceeded(self, live):
        hw = self.hw
        newest = max(live, key=lambda t: (t.first.pos, self._tiles.index(t)))
        others = sorted((t for t in live if t is not newest), key=self._tiles.index)
        held = self._banks(others)
        listed = ", ".join(f"'{t.name}' ({t.describe_banks(hw)})" for t in others)
        if newest.place is None:
            need = (f"{newest.describe_banks(hw)} ({newest.bytes} B per partition; every PSUM tensor takes whole "
                    f"banks of {hw.psum_bank_bytes} B)")
        else:
            need = (f"{newest.describe_banks(hw)} (address ({newest.place[0]}, {newest.place[1]}), {newest.bytes} B "
                    "per partition)")
        return NkiError(None, f"PSUM capacity exceeded: tensor '{newest.name}' needs {need}, but {held} of the "
                              f"{hw.psum_banks} banks are in use: {listed}; all are live at once: '{newest.name}' is "
                              f"first used at {newest.first} while each of the others is used again later (a PSUM "
                              "tile holds its banks from its first to its last use, and PSUM is not spilled)")

    # -- placed tiles ------------------------------------------------------------------------

    @staticmethod
    def _where(rows, cols, size, grid):
        """Index of the touched bytes into a (partition, byte) array: for a grid, the
        partitions x the bytes of its columns (slices when both are contiguous);
        else per cell, its partition (n, 1) and its bytes (n, size)."""
        nbytes = (cols[:, None] * size + np.arange(size)).reshape(-1) if grid else cols[:, None] * size + np.arange(size)
        if not grid:
            return rows[:, None], nbytes
        if rows.size == int(rows[-1]) - int(rows[0]) + 1 and nbytes.size == int(nbytes[-1]) - int(nbytes[0]) + 1:
            return slice(int(rows[0]), int(rows[-1]) + 1), slice(int(nbytes[0]), int(nbytes[-1]) + 1)
        return np.ix_(rows, nbytes)

    @staticmethod
    def _shifted(where, p, b):
        r, c = where
        if isinstance(r, slice):
            return slice(r.start + p, r.stop + p), slice(c.start + b, c.stop + b)
        return r + p, c + b

    def _write_placed(self, tile, rows, cols, size, grid):
        arena = self.arena(tile.psum)
        where = self._where(rows, cols, size, grid)
        arena.owner[self._shifted(where, *tile.place)] = tile.slot
        tile.written[where] = True
        tile.last_write = self.site()

    def _read_placed(self, tile, rows, cols, size, grid):
        arena = self.arena(tile.psum)
        where = self._where(rows, cols, size, grid)
        owners = arena.owner[self._shifted(where, *tile.place)]
        foreign = (owners != tile.slot) & (owners != 0)
        if not foreign.any():
            return
        mine = tile.written[where] & foreign
        if mine.any():
            raise self._clobber(tile, arena.slots[int(owners[mine][0])])
        r, c = where
        if isinstance(r, slice):
            r, c = np.arange(r.start, r.stop)[:, None], np.arange(c.start, c.stop)[None, :]
        r, c = np.broadcast_arrays(r, c)
        self._refresh(tile, arena, r[foreign], c[foreign])

    def _refresh(self, tile, arena, rows, nbytes):
        """Rebuilds `tile`'s cells holding the bytes (`rows`, `nbytes`: partition and
        byte of each) other tiles wrote, from their cells."""
        storage = tile.storage()
        if storage is None:
            return
        size = tile.dtype.size
        row_cells = tile.bytes // size
        cells = np.unique(rows * row_cells + nbytes // size)
        p0, b0 = tile.place
        for cell in cells.tolist():
            r, c = divmod(cell, row_cells)
            raw = bytearray(tile.dtype.to_bits(storage._cells[cell:cell + 1]).view(np.uint8).tobytes())
            lost = False
            for k in range(size):
                owner = int(arena.owner[p0 + r, b0 + c * size + k])
                if owner in (0, tile.slot):
                    continue
                value = self._byte_of(arena.slots[owner], p0 + r, b0 + c * size + k)
                if value is None:
                    lost = True
                else:
                    raw[k] = value
            if lost:
                storage._cells[cell] = tile.dtype.uninitialised()
            else:
                bits = np.frombuffer(bytes(raw), dtype=np.uint8).view(tile.dtype.bits_type)
                storage._cells[cell] = tile.dtype.from_bits(bits)[0]
            if storage.unwritten is not None:
                # Bytes another tile wrote are written; bytes of a tile gone are not.
                storage.unwritten[cell] = lost

    @staticmethod
    def _byte_of(owner, p, b):
        """Byte (p, b) of the memory as tile `owner` holds it (None once it is gone)."""
        storage = owner.storage()
        if storage is None:
            return None
        size = owner.dtype.size
        r, off = p - owner.place[0], b - owner.place[1]
        cell = r * (owner.bytes // size) + off // size
        raw = owner.dtype.to_bits(storage._cells[cell:cell + 1]).view(np.uint8)
        return int(raw[off % size])

    def _clobber(self, tile, other):
        mine = f"at {tile.last_write}" if tile.last_write else "earlier"
        theirs = f"at {other.last_write}" if other.last_write else "later"
        return NkiError(None, f"{self.site()} reads {tile.label()} {list(tile.shape)} {tile.dtype.name}, but bytes it "
                              f"wrote ({mine}) were overwritten through {other.label()} {list(other.shape)} "
                              f"{other.dtype.name} ({theirs}): tiles whose addresses overlap share their bytes, so the "
                              "second write clobbered data the first tile still needed; give them disjoint addresses "
                              f"or finish reading {tile.label()} before writing {other.label()}")
