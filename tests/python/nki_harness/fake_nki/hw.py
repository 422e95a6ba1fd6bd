"""Per-generation hardware limits (the numbers the emulator's checks use)."""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Hardware:
    """Limits and capabilities of one NeuronCore generation."""

    name: str
    nc_version: int
    pmax: int = 128
    psum_banks: int = 8
    psum_bank_bytes: int = 2048
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512
    gemm_moving_fmax_bf16_dst: int = 0
    bn_stats_fmax: int = 512
    psum_min_align: int = 4
    sbuf_min_align: int = 4
    sbuf_partition_bytes: int = 192 * 1024
    pe_transpose_max: int = 128
    vector_transpose_max: int = 32
    has_range_select: bool = False
    has_core_barrier: bool = False
    has_bf16_psum: bool = False
    has_scalar_activation_bias: bool = False
    # A matmul accumulating onto PSUM values a non-matmul instruction (memset,
    # tensor_copy, ...) wrote: undefined behaviour on NeuronCore-v2 and -v3 (nc_matmul docs).
    has_accumulate_onto_non_matmul_psum: bool = False


_TRN1 = Hardware("trn1", 2)
_TRN2 = replace(_TRN1, name="trn2", nc_version=3, has_range_select=True, has_core_barrier=True,
                has_scalar_activation_bias=True)
_TRN3 = replace(_TRN2, name="trn3", nc_version=4, gemm_moving_fmax=4096, gemm_moving_fmax_bf16_dst=8192,
                has_bf16_psum=True, has_accumulate_onto_non_matmul_psum=True)

GENERATIONS = {h.name: h for h in (_TRN1, _TRN2, _TRN3)}
