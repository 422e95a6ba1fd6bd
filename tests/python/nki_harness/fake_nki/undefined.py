"""Reads of memory nothing wrote: undefined behaviour, reported.

Every storage a kernel allocates keeps a mask of the cells no instruction has
written yet (`tensor.Storage.unwritten`); inputs are written. A read of such a
cell gets the fill of a fresh allocation (all bits zero: see SEMANTICS.md) and
is reported once per (tensor, instruction, kernel line), with how many elements
it read unwritten over the launch and the first of them. Reports are
`UndefinedRead` warnings raised when the launch ends (from the calling thread);
with `NKI_STRICT_UNINIT=1` the read is an error instead.
"""

import os
import threading
import warnings

import numpy as np

from .errors import NkiError
from .memory import kernel_line

STRICT_ENV = "NKI_STRICT_UNINIT"


class UndefinedRead(UserWarning):
    """A kernel read memory that nothing wrote since it was allocated."""


def strict():
    """Whether reads of unwritten memory are errors (`NKI_STRICT_UNINIT=1`)."""
    return os.environ.get(STRICT_ENV, "0") not in ("", "0")


class Reads:
    """The unwritten reads of one launch, by (tensor, instruction, line)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sites = {}

    def add(self, key, count, first):
        with self._lock:
            if key in self._sites:
                self._sites[key][0] += count
            else:
                self._sites[key] = [count, first]

    def messages(self):
        with self._lock:
            return [_message(*key, count, first) for key, (count, first) in self._sites.items()]


def _message(what, op, line, count, first):
    where = op + (f" ({line[0]}:{line[1]})" if line else "")
    return f"undefined behaviour: {_reads(where, what, count, first)}"


def _reads(subject, what, count, first):
    return (f"{subject} reads {count} element{'' if count == 1 else 's'} of {what} that nothing wrote since it was "
            f"allocated (the first at {first}); on hardware they hold whatever the memory held, here they read as "
            "zero bits")


def check(storage, cells, unwritten):
    """Reports the cells `cells` (flat storage indices) of `storage` whose
    `unwritten` flag (the mask over `cells`) is set."""
    if not unwritten.any():
        return
    from .runtime import _local

    cells = np.asarray(cells)
    first_cell = int(cells[np.unravel_index(int(np.argmax(unwritten)), unwritten.shape)])
    first = [int(i) for i in np.unravel_index(first_cell, storage.shape)]
    what = f"'{storage.name}' {list(storage.shape)} {storage.dtype.name} in {storage.buffer.label}"
    prog = getattr(_local, "program", None)
    op = prog.memory.op if prog is not None else "reading the kernel's outputs"
    line = kernel_line() if prog is not None else None
    count = int(np.count_nonzero(unwritten))
    if strict():
        err = NkiError(op, f"undefined behaviour: {_reads('the instruction', what, count, first)} ({STRICT_ENV}=1 "
                           "makes this an error)")
        err.location = line
        raise err
    if prog is None:
        warnings.warn(UndefinedRead(_message(what, op, line, count, first)), stacklevel=2)
    else:
        prog.world.undefined.add((what, op, line), count, first)


def report(reads):
    """Raises an `UndefinedRead` warning for every site of `reads` (at the end of a launch)."""
    for msg in reads.messages():
        warnings.warn(UndefinedRead(msg), stacklevel=3)
