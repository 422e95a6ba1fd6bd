"""`nki.language` (`nl`): dtypes, memory spaces, allocation, the SPMD grid and
loop forms, operator tokens, and the tile-level functions.

An operator token (`nl.add`, `nl.exp`, ...) is both an argument of ISA
instructions and, called on tiles, the element-wise tile function
(`elementwise.py`).
"""

from dataclasses import dataclass  # noqa: F401  (re-exported, as nki.language does)
from enum import Enum  # noqa: F401
from types import ModuleType as _ModuleType

from ..alu import OPS as _OPS
from ..dtypes import DTYPES as _DTYPES
from ..objects import NKIObject
from ..tensor import NkiTensor
from .allocation import (empty_like, full, ndarray, ones, shared_constant, shared_identity_matrix, zeros,
                         zeros_like)
from .buffers import PRIVATE_HBM as _PRIVATE_HBM
from .buffers import PSUM as _PSUM
from .buffers import SBUF as _SBUF
from .buffers import SHARED_HBM as _SHARED_HBM
from .buffers import MemoryRegion, is_hbm, is_on_chip, is_psum, is_sbuf
from .control import (affine_range, device_print, ds, dynamic_range, fori_loop, no_reorder, num_programs,
                      program_id, program_ndim, sequential_range, static_range, while_loop)
from .elementwise import where
from .movement import broadcast_to, expand_dims, gather_flattened, load, load_transpose2d, matmul, store, transpose
from .random import dropout, rand, random_seed
from .reductions import all, max, mean, min, prod, rms_norm, softmax, sum, var  # noqa: A004
from .tile_size import tile_size

DType = type(_DTYPES["float32"])
sbuf, psum, hbm, private_hbm, shared_hbm = _SBUF, _PSUM, _PRIVATE_HBM, _PRIVATE_HBM, _SHARED_HBM
globals().update(_DTYPES)
globals().update(_OPS)

__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and not isinstance(value, _ModuleType))
