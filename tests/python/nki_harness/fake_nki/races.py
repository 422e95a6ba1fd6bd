"""Races between the programs of a launch on shared HBM.

When one program writes an element of a shared-HBM tensor and another writes or
reads it with no synchronisation between the two accesses, nothing orders them
on the hardware, so the value left (or read) depends on timing. The launch
reports such a race as an error, naming the element and the programs
(SEMANTICS.md; the emulator applies the same rule).

Synchronisations are the rendezvous of the launch (`core_barrier`, `sendrecv`,
the collectives), ordered with vector clocks: each program keeps a clock per
program; a rendezvous joins its participants' clocks, then advances each one's
own entry. Each element of a shared-HBM storage remembers its last write (the
program and its clock then); an access by another program is ordered after it
when the accessor's clock of the writer has reached it. Reads are remembered
too, in storages some program wrote or the launch made: one read per element, the last unless
another program's unordered read came first. The data a synchronising
instruction moves is part of its rendezvous, and the fill of a new tensor part
of its allocation: neither is checked.
"""

import threading

import numpy as np

from .errors import NkiError

# Not checked: the instructions that synchronise the programs they join (every
# `ncc.*` op too), and the fill of a fresh tensor by the `nl` functions that
# allocate it (`nl.full` fills inside its `nl.ndarray`), which the emulator does
# at allocation as well.
_NOT_CHECKED = ("nisa.core_barrier", "nisa.sendrecv", "nl.ndarray", "nl.shared_constant")


class _Record:
    """The last write and a read of each cell of one storage: the program (-1
    for none) and its clock at the access."""

    def __init__(self, size):
        self.writer = np.full(size, -1, dtype=np.int64)
        self.written_at = np.zeros(size, dtype=np.int64)
        self.reader = np.full(size, -1, dtype=np.int64)
        self.read_at = np.zeros(size, dtype=np.int64)


class Races:
    """The happens-before record of a launch of several programs."""

    def __init__(self, ranks, programs):
        self.ranks = ranks
        self.programs = programs
        # clocks[s, t]: how far program s has seen program t's clock.
        self.clocks = np.eye(ranks * programs, dtype=np.int64)
        self._records = {}
        self._lock = threading.Lock()

    def synchronise(self, slots):
        """The programs `slots` met at a rendezvous: each has now seen what any of
        them had, and what each does next is ordered after it."""
        with self._lock:
            joined = self.clocks[list(slots)].max(axis=0)
            for s in slots:
                self.clocks[s] = joined
                self.clocks[s, s] += 1

    def _name(self, slot):
        return f"program {slot}" if self.ranks == 1 else f"rank {slot // self.programs} program {slot % self.programs}"

    def access(self, prog, storage, idx, cells=None):
        """Program `prog` reads cells `idx` of shared-HBM `storage` (or writes
        `cells` there): raises naming the first one another program wrote (or
        read, when this writes) unordered with this access. A write that leaves
        a cell as it was is no access to it: no reader or writer could tell it
        happened (over another program's unordered write of that value the cell
        then counts as written by no program in particular)."""
        write = cells is not None
        op = prog.memory.op or ""
        if op in _NOT_CHECKED or op.startswith("ncc."):
            return
        slot = prog.slot
        idx = np.asarray(idx).reshape(-1)
        with self._lock:
            rec = self._records.get(storage.id)
            if rec is None:
                # Reads of the kernel's inputs (written, never by a program) cost nothing.
                if not write and storage.unwritten is None:
                    return
                rec = self._records[storage.id] = _Record(storage.cells.size)
            seen = self.clocks[slot]

            def unordered(who, at):
                other = (who >= 0) & (who != slot)
                return other & (seen[np.where(other, who, 0)] < at)

            writes = unordered(rec.writer[idx], rec.written_at[idx])
            reads = unordered(rec.reader[idx], rec.read_at[idx])
            same = np.zeros(idx.shape, dtype=bool)
            if write:
                old, new = storage.cells[idx], np.reshape(cells, -1)
                same = (old == new) | ((old != old) & (new != new))
                if storage.unwritten is not None:
                    # What a cell nothing wrote holds is unknown: any write changes it.
                    same &= ~storage.unwritten[idx]
            racy = (writes | reads) & ~same if write else writes
            if racy.any():
                i = int(np.argmax(racy))
                first = rec.writer[idx[i]] if writes[i] else rec.reader[idx[i]]
                raise NkiError(op, _message(storage, int(idx[i]), self._name(int(first)), bool(writes[i]),
                                            self._name(slot), write))
            if write:
                # A cell left as it was is no access; over an unordered write
                # of its value it is neither program's.
                rec.writer[idx] = np.where(same, np.where(writes, -1, rec.writer[idx]), slot)
                rec.written_at[idx] = np.where(same & ~writes, rec.written_at[idx], seen[slot])
            else:
                keep = idx[~reads]
                rec.reader[keep] = slot
                rec.read_at[keep] = seen[slot]


def _message(storage, cell, first, first_wrote, then, write):
    element = [int(i) for i in np.unravel_index(cell, storage.shape)]
    a, b = ("written" if first_wrote else "read"), ("written" if write else "read")
    both = f"{a} by {first} and by {then}" if a == b else f"{a} by {first} and {b} by {then}"
    return (f"element {element} of '{storage.name}' {list(storage.shape)} {storage.dtype.name} in "
            f"{storage.buffer.label} is {both} without a synchronisation between, so the result depends on timing; "
            "a core_barrier (or a collective) both programs join orders them")


def check(storage, idx, cells=None):
    """Checks a read of cells `idx` of `storage` by the calling program (a write
    of `cells` when given); a no-op outside shared HBM and in a launch of one
    program."""
    from .runtime import _local
    from .tensor import SHARED_HBM

    prog = getattr(_local, "program", None)
    if storage.buffer is not SHARED_HBM or prog is None or prog.world.races is None:
        return
    prog.world.races.access(prog, storage, idx, cells)
