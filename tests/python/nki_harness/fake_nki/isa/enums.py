"""The enums of `nki.isa` with their documented values: engines, reduce
commands, DMA modes, matmul modes, NeuronCore versions, DMA engines.

As in NKI, an argument may name a member either as the member
(`nisa.dge_mode.none`) or as its documented value (`dge_mode=3`);
`member` resolves both and rejects anything else, naming the valid values.
"""

from enum import Enum, IntEnum

from ..errors import NkiError

engine = IntEnum("engine", [("tensor", 1), ("vector", 5), ("scalar", 2), ("gpsimd", 3), ("dma", 4), ("sync", 6),
                            ("unknown", 0)])
reduce_cmd = IntEnum("reduce_cmd", [("idle", 0), ("reset", 1), ("reduce", 2), ("reset_reduce", 3),
                                    ("load_reduce", 4)])
dge_mode = IntEnum("dge_mode", [("unknown", 0), ("swdge", 1), ("hwdge", 2), ("none", 3)])
oob_mode = IntEnum("oob_mode", [("error", 0), ("skip", 1)])
matmul_perf_mode = Enum("matmul_perf_mode", [("none", "none"), ("double_row", "double_row")])
nc_version = IntEnum("nc_version", [("gen2", 2), ("gen3", 3), ("gen4", 4)])
dma_engine = IntEnum("dma_engine", [("dma", 1), ("gpsimd_dma", 2)])

# Deprecated module-level engine constants of `nki.isa`.
tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown


def member(op, role, value, enum, default):
    """`value` as a member of `enum`: a member, or a member's documented value
    (`default` when None)."""
    if value is None:
        return default
    if isinstance(value, enum):
        return value
    if not isinstance(value, (bool, Enum)):
        try:
            return enum(value)
        except (ValueError, TypeError):
            pass
    valid = ", ".join(f"{m.name}={m.value!r}" for m in enum)
    raise NkiError(op, f"{role} must be a member of nisa.{enum.__name__} or its value ({valid}), got {value!r}")
