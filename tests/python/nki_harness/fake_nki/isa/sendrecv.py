"""`sendrecv`: the two programs of an LNC2 pair swap SBUF tiles."""

from ..errors import NkiError
from ..objects import NkiInstruction
from ..runtime import current
from ..tensor import SBUF, NkiTensor, describe
from ..tile import Tile
from .enums import dma_engine as _dma_engine
from .enums import member

# GpSimd DMA moves at most this many bytes per partition.
_GPSIMD_DMA_PARTITION_BYTES = 1024


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, name=None):
    """Program p sends `src` to program `send_to_rank` and receives program
    `recv_from_rank`'s `src` into its `dst`. Both programs of the pair issue
    it; the n-th sendrecv of a `pipe_id` pairs with the partner's n-th of the same
    pipe_id, and every source is read before any destination is written."""
    op = "nisa.sendrecv"
    prog = current()
    prog.begin_op(op)  # not an `instruction`: it must not hold the memory lock while it waits
    engine = member(op, "dma_engine", dma_engine, _dma_engine, _dma_engine.dma)
    if prog.hw.nc_version < 3:
        raise NkiError(op, f"sendrecv needs NeuronCore-v3 (trn2) or later; the launch targets {prog.hw.name}")
    if prog.num_programs != 2:
        raise NkiError(op, "sendrecv exchanges data within an LNC2 pair, but the kernel was launched without an "
                           "LNC2 grid (kernel[2])")
    for role, t in (("src", src), ("dst", dst)):
        if not isinstance(t, NkiTensor) or t.buffer is not SBUF:
            raise NkiError(op, f"{role} {describe(t)} must be in SBUF")
    s, d = Tile(op, "src", src), Tile(op, "dst", dst)
    if src.dtype is not dst.dtype or src.shape != dst.shape:
        raise NkiError(op, f"src {src.describe()} and dst {dst.describe()} must have the same dtype and shape")
    if engine is _dma_engine.gpsimd_dma and s.nf * src.dtype.size > _GPSIMD_DMA_PARTITION_BYTES:
        raise NkiError(op, f"dma_engine=gpsimd_dma moves at most {_GPSIMD_DMA_PARTITION_BYTES} bytes per partition; "
                           f"src holds {s.nf * src.dtype.size}")
    for role, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if int(r) not in (0, 1) or int(r) == prog.program:
            raise NkiError(op, f"{role}={r}: program {prog.program} of an LNC2 pair exchanges with the other "
                               "program (0 or 1, not itself)")

    def complete(parts):
        sent = {me: (to, frm, s_.read_raw()) for me, to, frm, s_, _ in parts}
        for me, _, frm, _, d_ in parts:
            if sent[frm][0] != me:
                raise NkiError(op, f"program {me} receives from program {frm}, which sends to program {sent[frm][0]}")
            d_.write_raw(sent[frm][2])

    prog.rank_rendezvous(("sendrecv", int(pipe_id)), "sendrecv", (prog.program, int(send_to_rank),
                                                                    int(recv_from_rank), s, d), complete)
    return NkiInstruction("sendrecv")
