"""Scalar engine: `activate2`, two tensor-scalar stages, an activation and an optional row reduction."""

import numpy as np
from ..alu import OPS, check_op, identity, prelu, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .reduce import accumulate, write_reduce_res


# The (op0, op1) pairs of activate2's tensor-scalar stage, as documented.
_ACTIVATE2_STAGES = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
                     ("subtract", "bypass"), ("bypass", "bypass")}


_ACTIVATE2_REDUCE = ("add", "maximum", "minimum", "abs_max", "abs_min")


@instruction
def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False, reverse1=False, reduce_op=None,
              reduce_res=None, reduce_cmd=None, name=None):
    """`dst = op((data op0 imm0) op1 imm1)` in float32 (`reverse*` swaps a stage's
    operands; `nl.bypass` skips it; nl.prelu takes `relu_param` as its slope);
    with a reduction, each row of the float32 outputs folds into the Scalar
    accumulators with `reduce_op` per `reduce_cmd`. NeuronCore-v4+."""
    name_ = "nisa.activate2"
    prog = current()
    if prog.hw.nc_version < 4:
        raise NkiError(name_, f"activate2 needs NeuronCore-v4 (trn3); the launch targets {prog.hw.name}")
    check_op(name_, "op", op, arity=1)
    check_op(name_, "op0", op0, arity=2)
    check_op(name_, "op1", op1, arity=2)
    if (op0.name, op1.name) not in _ACTIVATE2_STAGES:
        raise NkiError(name_, f"(op0, op1) = ({op0}, {op1}) is not one of the documented tensor-scalar stages "
                              f"{sorted(_ACTIVATE2_STAGES)}")
    if (reverse0 and op0.name == "bypass") or (reverse1 and op1.name == "bypass"):
        raise NkiError(name_, "reverse0 / reverse1 need their op0 / op1 to be set (not nl.bypass)")
    x, d = Tile(name_, "data", data), Tile(name_, "dst", dst)
    same_geometry(name_, "dst", d, "data", x)
    t = x.read()
    for stage, imm, rev in ((op0, imm0, reverse0), (op1, imm1, reverse1)):
        if stage.name != "bypass":
            c = column(name_, "imm", imm, x.np)
            t = stage(c, t) if rev else stage(t, c)
    out = prelu(t, column(name_, "relu_param", relu_param, x.np)) if op is OPS["prelu"] else op(t)
    d.write(out, prog.rounds)
    cmd = member(name_, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.idle)
    if reduce_op is None and reduce_res is None and cmd is _reduce_cmd.idle:
        return
    rop = OPS["add"] if reduce_op is None else reduce_op
    if rop.name not in _ACTIVATE2_REDUCE:
        raise NkiError(name_, f"reduce_op must be one of {', '.join('nl.' + n for n in _ACTIVATE2_REDUCE)}")
    if cmd is _reduce_cmd.load_reduce:
        raise NkiError(name_, "reduce_cmd=load_reduce is not available on the Scalar engine")
    folded = {"abs_max": OPS["maximum"], "abs_min": OPS["minimum"]}.get(rop.name, rop)
    rows_in = np.abs(out) if rop.name.startswith("abs_") else out
    rows = reduce_rows(folded, rows_in, identity(folded))
    regs = accumulate(prog.scalar_acc, folded, cmd, rows)
    if reduce_res is not None:
        write_reduce_res(name_, reduce_res, regs)
