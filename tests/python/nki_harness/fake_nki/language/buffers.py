"""Memory spaces: `nl.sbuf`, `nl.psum`, `nl.hbm` (= `nl.private_hbm`),
`nl.shared_hbm`, the `nl.MemoryRegion` enum and the `nl.is_*` predicates.

Wherever a buffer is expected, a `MemoryRegion` member or its string value
('sbuf', 'psum', 'hbm', 'private_hbm', 'shared_hbm') names the same space.
"""

from enum import Enum

from ..errors import NkiError
from ..tensor import PRIVATE_HBM, PSUM, SBUF, SHARED_HBM, Buffer


class MemoryRegion(Enum):
    """Memory region constants for NKI tensors."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"


_BY_NAME = {"sbuf": SBUF, "psum": PSUM, "hbm": PRIVATE_HBM, "private_hbm": PRIVATE_HBM, "shared_hbm": SHARED_HBM}


def as_buffer(op, role, value):
    """`value` (a buffer, a MemoryRegion member or its name) as a buffer."""
    if isinstance(value, Buffer):
        return value
    key = value.value if isinstance(value, MemoryRegion) else value
    if isinstance(key, str) and key in _BY_NAME:
        return _BY_NAME[key]
    raise NkiError(op, f"{role} must be nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm, got {value!r}")


def is_hbm(buffer):
    """Whether `buffer` is an HBM space (private or shared)."""
    return not as_buffer("nl.is_hbm", "buffer", buffer).on_chip


def is_on_chip(buffer):
    """Whether `buffer` is SBUF or PSUM."""
    return as_buffer("nl.is_on_chip", "buffer", buffer).on_chip


def is_psum(buffer):
    """Whether `buffer` is PSUM."""
    return as_buffer("nl.is_psum", "buffer", buffer) is PSUM


def is_sbuf(buffer):
    """Whether `buffer` is SBUF."""
    return as_buffer("nl.is_sbuf", "buffer", buffer) is SBUF
