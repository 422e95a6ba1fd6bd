"""`nki.language` (`nl`): dtypes, memory spaces, allocation, the SPMD grid and
loop forms, operator tokens, and the tile-level functions.

An operator token (`nl.add`, `nl.exp`, ...) is both an argument of ISA
instructions and, called on tiles, the element-wise tile function
(`elementwise.py`).
"""

from dataclasses import dataclass  # noqa: F401  (re-exported, as nki.language does)
from enum import Enum  # noqa: F401

from ..alu import OPS
from ..dtypes import DTYPES
from ..objects import NKIObject
from ..tensor import NkiTensor
from .allocation import (empty_like, full, ndarray, ones, shared_constant, shared_identity_matrix, zeros,
                         zeros_like)
from .buffers import (PRIVATE_HBM, PSUM, SBUF, SHARED_HBM, MemoryRegion, is_hbm, is_on_chip, is_psum,
                      is_sbuf)
from .control import (affine_range, device_print, ds, dynamic_range, fori_loop, no_reorder, num_programs,
                      program_id, program_ndim, sequential_range, static_range, while_loop)
from .elementwise import where
from .movement import broadcast_to, expand_dims, gather_flattened, load, load_transpose2d, matmul, store, transpose
from .random import dropout, rand, random_seed
from .reductions import all, max, mean, min, prod, rms_norm, softmax, sum, var  # noqa: A004
from .tile_size import tile_size

DType = type(DTYPES["float32"])
sbuf, psum, hbm, private_hbm, shared_hbm = SBUF, PSUM, PRIVATE_HBM, PRIVATE_HBM, SHARED_HBM
globals().update(DTYPES)
globals().update(OPS)

__all__ = sorted(
    ["Enum", "dataclass", "NKIObject", "NkiTensor", "MemoryRegion", "DType", "sbuf", "psum", "hbm", "private_hbm",
     "shared_hbm", "tile_size", "empty_like", "full", "ndarray", "ones", "shared_constant", "shared_identity_matrix", "zeros",
     "zeros_like", "is_hbm", "is_on_chip", "is_psum", "is_sbuf", "affine_range", "device_print", "ds",
     "dynamic_range", "fori_loop", "no_reorder", "num_programs", "program_id", "program_ndim",
     "sequential_range", "static_range", "while_loop", "where", "broadcast_to", "expand_dims",
     "gather_flattened", "load", "load_transpose2d", "matmul", "store", "transpose", "dropout", "rand",
     "random_seed", "all", "max", "mean", "min", "prod", "rms_norm", "softmax", "sum", "var"]
    + list(DTYPES) + list(OPS))
