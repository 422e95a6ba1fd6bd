"""`NkiTensor.__setitem__`: element assignment into a view."""

import numpy as np

from .dtypes import convert
from .errors import NkiError
from .runtime import current, instruction
from .tensor import NkiTensor


@instruction
def assign(view, value):
    """Writes `value` (a tensor of as many elements, or a number) into `view`."""
    op = "setitem"
    view.check_bounds(op)
    prog = current()
    if isinstance(value, NkiTensor):
        value.check_bounds(op)
        if value.size != view.size:
            raise NkiError(op, f"{value.describe()} has {value.size} elements but the target view of "
                               f"{view.describe()} has {view.size}")
        view.write_cells(convert(value.read_cells().reshape(-1), value.dtype, view.dtype, prog.rounds), op)
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        view.write_cells(view.dtype.encode(np.full(view.shape, value, dtype=np.float32), prog.rounds), op)
    else:
        raise NkiError(op, f"can assign a tensor or a number, got {value!r}")
