"""The SPMD grid (`program_id`, `num_programs`, `program_ndim`), `ds`, loop
forms (the static ranges, `dynamic_range`, `fori_loop`, `while_loop`),
`no_reorder` and `device_print`.

Loops run as Python loops: the executor runs instructions in program order.
Static ranges yield Python ints. The device loops take `VirtualRegister`
bounds (read when the loop starts) and hand their body the index as a register,
as the device does: `dynamic_range` yields a frozen register per iteration and
`fori_loop` passes a fresh one, so a kernel that reads the index at trace time
(`if i == 0`, `i * 128`, a shape or a slice) fails here as it would when traced.
"""

import contextlib
import operator

import numpy as np

from ..errors import NkiError
from ..registers import TRACE_TIME, VirtualRegister
from ..runtime import current
from ..tensor import NkiTensor


# The most iterations a `while_loop` runs: the emulator's bound on a device loop
# (`nl::WHILE_LOOP_MAX_ITERATIONS`; a Rust test pins the two together). Past it
# both executions fail instead of spinning.
WHILE_LOOP_MAX_ITERATIONS = 1 << 20


def _axis(op, axis):
    if axis != 0:
        raise NkiError(op, f"axis {axis} does not exist: the launch grid has {1 if current().grid else 0} dims")


def program_id(axis=0):
    """This program's index in the LNC grid (0 without a grid)."""
    _axis("nl.program_id", axis)
    return current().program


def num_programs(axes=0):
    """The grid size (1 without a grid)."""
    _axis("nl.num_programs", axes)
    return current().num_programs


def program_ndim():
    """1 when launched with a grid (`kernel[n]`), 0 without."""
    return 1 if current().grid else 0


def ds(start, size):
    """`size` positions from `start`, for indexing: `t[nl.ds(s, n)]` is `t[s:s + n]`.
    Both are trace-time integers (a register's offset goes through `.ap(scalar_offset=)`)."""
    if isinstance(start, VirtualRegister) or isinstance(size, VirtualRegister):
        raise NkiError("nl.ds", TRACE_TIME)
    return slice(start, start + size)


def affine_range(start, stop=None, step=1):
    """A trace-time loop range (`range` with NKI's name)."""
    return range(start, stop, step) if stop is not None else range(start)


sequential_range = static_range = affine_range


def _bound(op, value):
    if isinstance(value, VirtualRegister):
        return value.value
    try:
        return operator.index(value)
    except TypeError:
        raise NkiError(op, f"a loop bound must be an integer or a VirtualRegister, got {value!r}") from None


def _step(op, step):
    if isinstance(step, VirtualRegister) or not isinstance(step, int) or step < 1:
        raise NkiError(op, f"step must be a compile-time positive integer, got {step!r}")
    return step


def dynamic_range(start, stop=None, step=1):
    """A run-time loop range; bounds may be registers (read when the loop starts).
    Each index is a frozen register."""
    op = "nl.dynamic_range"
    lo, hi = (0, _bound(op, start)) if stop is None else (_bound(op, start), _bound(op, stop))
    return (VirtualRegister(i, frozen=True) for i in range(lo, hi, _step(op, step)))


def fori_loop(lower, upper, body_fun, step=1):
    """Calls `body_fun(i)` for i in `range(lower, upper, step)`, `i` a fresh register."""
    op = "nl.fori_loop"
    for i in range(_bound(op, lower), _bound(op, upper), _step(op, step)):
        index = VirtualRegister(i)
        index.is_index = True
        body_fun(index)


def while_loop(init, body_fun):
    """`r = init; while r != 0: r = body_fun(r)`, `r` passed by value as a register."""
    op = "nl.while_loop"
    if not isinstance(init, VirtualRegister):
        raise NkiError(op, f"init must be a VirtualRegister, got {init!r}")
    reg = init
    count = 0
    while reg.value != 0:
        count += 1
        if count > WHILE_LOOP_MAX_ITERATIONS:
            raise NkiError(op, f"the condition register was still nonzero after {WHILE_LOOP_MAX_ITERATIONS} iterations "
                               "(the emulator's bound on a device loop); the body must eventually return a zero register")
        current().begin_op(op)  # a loop that never ends still stops with its launch
        reg = body_fun(VirtualRegister(reg.value))
        if not isinstance(reg, VirtualRegister):
            raise NkiError(op, f"body_fun must return the next condition register, returned {reg!r}")


@contextlib.contextmanager
def no_reorder():
    """A region whose instructions keep program order (they always do here)."""
    yield


def device_print(print_prefix, tensor):
    """Prints `print_prefix` and the tensor's values to stdout at once."""
    if not isinstance(tensor, NkiTensor):
        raise NkiError("nl.device_print", f"tensor must be an NkiTensor, got {tensor!r}")
    prog = current()
    values = tensor.dtype.decode(tensor.read_cells())
    print(f"{print_prefix} [rank {prog.rank} program {prog.program}] {tensor.describe()}:\n"
          f"{np.array2string(values, threshold=64)}", flush=True)
