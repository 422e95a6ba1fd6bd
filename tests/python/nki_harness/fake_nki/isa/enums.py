"""The enums of `nki.isa`: engines, reduce commands, DMA modes, matmul modes,
NeuronCore versions (comparable with ints)."""

from enum import Enum, IntEnum

from ..errors import NkiError

engine = Enum("engine", ["tensor", "vector", "scalar", "gpsimd", "dma", "sync", "unknown"])
reduce_cmd = Enum("reduce_cmd", ["idle", "reset", "reduce", "reset_reduce", "load_reduce"])
dge_mode = Enum("dge_mode", ["unknown", "swdge", "hwdge", "none"])
oob_mode = Enum("oob_mode", ["error", "skip"])
matmul_perf_mode = Enum("matmul_perf_mode", ["none", "double_row"])
nc_version = IntEnum("nc_version", [("gen2", 2), ("gen3", 3), ("gen4", 4)])


def member(op, role, value, enum, default):
    """`value` checked to be a member of `enum` (`default` when None)."""
    if value is None:
        return default
    if not isinstance(value, enum):
        raise NkiError(op, f"{role} must be a member of nisa.{enum.__name__}, got {value!r}")
    return value
