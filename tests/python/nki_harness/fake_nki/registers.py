"""`nisa.VirtualRegister`: a runtime 32-bit scalar of one program.

A register's value exists only when the device runs the kernel: tracing cannot
read it. So a register refuses what would read it at trace time (comparisons,
arithmetic, conversion to an integer or a string, a Python `if`) with the words
the macro uses for the same refusals (nki-spec's `registers` texts, pinned by a
Rust test). It is read only where the docs take one: device-loop bounds,
`while_loop` conditions, `scalar_offset`, a dynamic `select`, `register_move` /
`register_store`. `while reg:` still tests it, as NKI's parser frontend and the
library's kernels do, except for a device loop's index (`is_index`), which no
trace-time test reads; the index of `nl.dynamic_range` is also frozen: nothing
writes it.
"""

from .errors import NkiError
from .objects import NKIObject

# Keep these in step with nki-core/spec/src/registers.rs.
TESTED = ("a register holds a run-time value (a device loop's index is a register), which `if`, `assert` and "
          "comparisons cannot read while the kernel is traced: peel that iteration out of the loop, or test on the "
          "device (nisa.register_store the register into a tile and compute with tiles)")
ARITHMETIC = ("a register holds a run-time value (a device loop's index is a register), and NKI has no arithmetic on "
              "registers: keep the value in an SBUF tile advanced with nisa.tensor_scalar and pass that tile as "
              "`scalar_offset`, or let `.ap(pattern, scalar_offset=i, indirect_dim=d)` scale the index by dim d's "
              "step")
TRACE_TIME = ("a register holds a run-time value (a device loop's index is a register), but a shape, an immediate, an "
              "index, a slice bound or a trace-time range is fixed when the kernel is traced: address with it through "
              "`.ap(pattern, scalar_offset=i, indirect_dim=d)`, or nisa.register_store it into a tile")
FROZEN = ("the index of nl.dynamic_range is frozen: nisa.register_move and nisa.register_load cannot write it (copy it "
          "into a register of your own with nisa.register_move)")

_OP = "nisa.VirtualRegister"


def _refuse(why):
    def method(self, *args):
        raise NkiError(_OP, why)

    return method


class VirtualRegister(NKIObject):
    """A register; `value` is its current integer content (read by the
    instructions that take a register), `frozen` whether it is the index of
    `nl.dynamic_range`, `is_index` whether it is a device loop's index."""

    def __init__(self, state=None, frozen=False):
        self.value = int(state or 0)
        self.frozen = frozen
        self.is_index = frozen

    def __bool__(self):
        if self.is_index:
            raise NkiError(_OP, TESTED)
        return self.value != 0

    def set(self, op, value):
        """Stores `value` wrapped to a signed 32-bit integer on behalf of instruction
        `op` (refused on a frozen register)."""
        if self.frozen:
            raise NkiError(op, FROZEN)
        self.value = (int(value) + (1 << 31)) % (1 << 32) - (1 << 31)

    def __repr__(self):
        return f"VirtualRegister({self.value})"

    __hash__ = object.__hash__
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse(TESTED)
    __index__ = __int__ = __float__ = __format__ = _refuse(TRACE_TIME)
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse(ARITHMETIC)
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _refuse(ARITHMETIC)
    __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = __lshift__ = __rshift__ = _refuse(ARITHMETIC)
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = _refuse(ARITHMETIC)
