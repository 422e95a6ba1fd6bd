"""Per-generation hardware limits (the numbers the executor's checks use).

The numbers are the spec's (`nki-core/spec/src/hw.rs`), rendered into
`hw_limits.json` by the Rust test `executor_hw_limits_are_the_specs`
(`tests/emit/snapshots.rs`), which fails when the two differ. Only the alignment
constants of `nl.tile_size`, which the spec does not hold, are set here.
"""

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Hardware:
    """Limits and capabilities of one NeuronCore generation."""

    name: str
    nc_version: int
    pmax: int
    sbuf_partition_bytes: int
    psum_banks: int
    psum_bank_bytes: int
    gemm_stationary_fmax: int
    gemm_moving_fmax: int
    # 0 where bf16 PSUM does not exist.
    gemm_moving_fmax_bf16_dst: int
    bn_stats_fmax: int
    # `nl.tile_size.gemm_moving_fmax`, the same on every generation; a matmul's
    # limit is `gemm_moving_fmax`.
    tile_gemm_moving_fmax: int
    pe_transpose_max: int
    vector_transpose_max: int
    has_range_select: bool
    has_core_barrier: bool
    has_bf16_psum: bool
    has_scalar_activation_bias: bool
    # A matmul accumulating onto PSUM values a non-matmul instruction (memset,
    # tensor_copy, ...) wrote: undefined behaviour on NeuronCore-v2 and -v3 (nc_matmul docs).
    has_accumulate_onto_non_matmul_psum: bool
    psum_min_align: int = 4
    sbuf_min_align: int = 4


_SPEC = json.loads((Path(__file__).resolve().parent / "hw_limits.json").read_text())
GENERATIONS = {name: Hardware(name=name, **limits) for name, limits in _SPEC.items()}
