"""Scalar engine: `activation` and `activation_reduce`."""

import numpy as np

from ..alu import OPS, check_op, identity, prelu, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import NkiTensor
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .reduce import accumulate, write_reduce_res


def _activate(name, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd):
    check_op(name, "op", op, arity=1)
    x, d = Tile(name, "data", data), Tile(name, "dst", dst)
    same_geometry(name, "dst", d, "data", x)
    prog = current()
    s = column(name, "scale", scale, x.np)
    if bias is not None and not isinstance(bias, NkiTensor) and not prog.hw.has_scalar_activation_bias:
        raise NkiError(name, f"a scalar bias needs trn2 or later; on {prog.hw.name} pass a (P, 1) column")
    b = np.float32(0) if bias is None else column(name, "bias", bias, x.np)
    cmd = member(name, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.idle)
    reduces = reduce_op is not None or reduce_res is not None or cmd is not _reduce_cmd.idle
    if reduce_op is not None and reduce_op is not OPS["add"]:
        raise NkiError(name, f"reduce_op must be nl.add on the Scalar engine, got {reduce_op!r}")
    if cmd is _reduce_cmd.load_reduce:
        raise NkiError(name, "reduce_cmd=load_reduce is not available on the Scalar engine")
    out = op(x.read() * s + b)
    d.write(out, prog.rounds)
    if reduces:
        regs = accumulate(prog.scalar_acc, OPS["add"], cmd, reduce_rows(OPS["add"], out, 0.0))
        if reduce_res is not None:
            write_reduce_res(name, reduce_res, regs)


@instruction
def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, name=None):
    """`dst = op(data * scale + bias)` in float32 (multiply, then add), rounded once
    to `dst.dtype`. With a reduction, each row's float32 outputs are summed into
    the Scalar engine accumulators per `reduce_cmd` (default `idle`), and
    `reduce_res` (if given) receives them."""
    _activate("nisa.activation", dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd)


@instruction
def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """`activation` with `reduce_cmd=reset_reduce`: `reduce_res` receives each row's sum."""
    _activate("nisa.activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res,
              _reduce_cmd.reset_reduce)


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


@instruction
def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=None, reduce_init=0.0, name=None):
    """`dst = exp(src - max_value)` in float32 on the Vector engine (`max_value` a
    number or a (P, 1) column); with a reduce_cmd, each row's float32 results are
    summed into the Vector accumulators (`load_reduce` starts from `reduce_init`).
    NeuronCore-v4+."""
    op = "nisa.exponential"
    prog = current()
    if prog.hw.nc_version < 4:
        raise NkiError(op, f"exponential needs NeuronCore-v4 (trn3); the launch targets {prog.hw.name}")
    x, d = Tile(op, "src", src), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "src", x)
    if src.ndim > 4 or dst.ndim > 4:
        raise NkiError(op, "src and dst must be at most 4-d")
    cmd = member(op, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.idle)
    if cmd is _reduce_cmd.reset:
        raise NkiError(op, "reduce_cmd must be idle, reset_reduce, reduce or load_reduce")
    init = column(op, "reduce_init", reduce_init, x.np)
    if cmd is not _reduce_cmd.load_reduce and np.any(init != 0):
        raise NkiError(op, "reduce_init must be 0.0 unless reduce_cmd is load_reduce")
    out = OPS["exp"](x.read() - column(op, "max_value", max_value, x.np))
    d.write(out, prog.rounds)
    if cmd is not _reduce_cmd.idle:
        regs = accumulate(prog.vector_acc, OPS["add"], cmd, reduce_rows(OPS["add"], out, 0.0), init)
        if reduce_res is not None:
            write_reduce_res(op, reduce_res, regs)
    elif reduce_res is not None:
        raise NkiError(op, "reduce_res needs a reduce_cmd other than idle")
