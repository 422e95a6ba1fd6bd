"""`nki.isa` (`nisa`): the NeuronCore instructions with the emulator's semantics.

Each op checks the rules the nki-rs emulator checks (memory spaces, partition
and free sizes, dtypes, generation) and raises `NkiError` naming the op, the
tensor and the limit.
"""

from ..registers import VirtualRegister
from .activation import activation, activation_reduce
from .dma import dma_copy, dma_transpose
from .elementwise import memset, reciprocal, scalar_tensor_tensor, tensor_copy, tensor_scalar, tensor_tensor
from .enums import dge_mode, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd
from .matmul import nc_matmul, nc_transpose
from .reduce import tensor_reduce, tensor_scalar_reduce
from .select import affine_select, iota, range_select
from .shuffle import nc_stream_shuffle
from .sync import core_barrier, get_nc_version, register_alloc, register_load, register_move, register_store

__all__ = [
    "VirtualRegister", "activation", "activation_reduce", "dma_copy", "dma_transpose", "memset", "reciprocal",
    "scalar_tensor_tensor", "tensor_copy", "tensor_scalar", "tensor_tensor", "dge_mode", "engine",
    "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd", "nc_matmul", "nc_transpose", "tensor_reduce",
    "tensor_scalar_reduce", "affine_select", "iota", "range_select", "nc_stream_shuffle", "core_barrier",
    "get_nc_version", "register_alloc", "register_load", "register_move", "register_store",
]
