"""`nki.isa` (`nisa`): the NeuronCore instructions.

Each op implements its NKI 2.32 docstring and checks the rules it documents
(memory spaces, partition and free sizes, dtypes, generation), raising
`NkiError` (a `NkiValidationError`) naming the op, the tensor and the rule.
"""

from dataclasses import dataclass  # noqa: F401  (re-exported, as nki.isa does)
from enum import Enum  # noqa: F401
from types import ModuleType as _ModuleType

from ..alu import OPS as _OPS
from ..errors import NkiValidationError
from ..objects import NKIObject, NkiInstruction
from ..registers import VirtualRegister
from ..tensor import NkiTensor
from . import constants  # noqa: F401  (`nki.isa.constants`, a module of the enums)
from .activate2 import activate2
from .activation import activation, activation_reduce
from .cumulative import tensor_scalar_cumulative
from .dma import dma_copy, dma_transpose
from .dma_compute import dma_compute
from .elementwise import memset, reciprocal, scalar_tensor_tensor, tensor_copy, tensor_scalar, tensor_tensor
from .enums import (dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd,
                    scalar_engine, tensor_engine, unknown_engine, vector_engine)
from .exponential import exponential
from .gather import local_gather, nc_n_gather
from .matmul import nc_matmul, nc_transpose
from .mx import nc_matmul_mx, quantize_mx
from .nonzero import nonzero_with_count
from .partition_reduce import tensor_partition_reduce
from .predicated import tensor_copy_predicated
from .random import dropout, rand2, rand_get_state, rand_set_state, rng, set_rng_seed
from .reduce import tensor_reduce, tensor_scalar_reduce
from .scan import tensor_tensor_scan
from .select import affine_select, iota, range_select
from .select_reduce import select_reduce
from .sendrecv import sendrecv
from .sequence_bounds import sequence_bounds
from .shuffle import nc_stream_shuffle
from .stats import bn_aggr, bn_stats
from .sync import (core_barrier, get_nc_sub_version, get_nc_version, register_alloc, register_load, register_move,
                   register_store)
from .top8 import max8, nc_find_index8, nc_match_replace8
from .topk import topk

equal, maximum = _OPS["equal"], _OPS["maximum"]

__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and not isinstance(value, _ModuleType))
