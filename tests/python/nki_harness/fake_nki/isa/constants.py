"""`nki.isa.constants`: the enums of `nki.isa` under the module path kernels
also import them from (`from nki.isa.constants import dge_mode, oob_mode`;
`from nki.isa import constants`). The official stubs list the enums on
`nki.isa` only; the AWS NKI library's kernels and the SDK's own examples import
this module, so it holds the very same enum objects: `constants.oob_mode.skip is
nisa.oob_mode.skip`.
"""

from .enums import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd

__all__ = ["dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
