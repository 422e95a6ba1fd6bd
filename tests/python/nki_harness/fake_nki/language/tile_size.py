"""`nl.tile_size`: the hardware tile limits of the launch's generation."""

from ..hw import GENERATIONS
from ..objects import NKIObject
from ..runtime import _local


def _hw():
    prog = getattr(_local, "program", None)
    return prog.hw if prog is not None else GENERATIONS["trn2"]


class _TileSize(NKIObject):
    """Hardware tile size constants; read inside a kernel they are the launch's
    generation's (trn2's outside one)."""

    pmax = property(lambda self: _hw().pmax)
    psum_fmax = property(lambda self: _hw().psum_bank_bytes // 4)
    psum_bank_fmax = property(lambda self: _hw().psum_bank_bytes // 4)
    psum_bank_fmax_bytes = property(lambda self: _hw().psum_bank_bytes)
    gemm_stationary_fmax = property(lambda self: _hw().gemm_stationary_fmax)
    gemm_moving_fmax = property(lambda self: _hw().tile_gemm_moving_fmax)
    bn_stats_fmax = property(lambda self: _hw().bn_stats_fmax)
    psum_min_align = property(lambda self: _hw().psum_min_align)
    sbuf_min_align = property(lambda self: _hw().sbuf_min_align)
    psum_num_banks = property(lambda self: _hw().psum_banks)
    sbuf_fmax_bytes = property(lambda self: _hw().sbuf_partition_bytes)
    sbuf_fmax = property(lambda self: _hw().sbuf_partition_bytes // 4)
    sbuf_size_bytes = property(lambda self: _hw().sbuf_partition_bytes * _hw().pmax)
    total_available_sbuf_size = property(lambda self: _hw().sbuf_partition_bytes)


tile_size = _TileSize()
