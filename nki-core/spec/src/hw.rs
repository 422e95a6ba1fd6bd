//! Hardware tables per NeuronCore generation.
//!
//! The numbers come from the NKI architecture guides and `nl.tile_size`; every
//! emulator check that names a limit reads it from here.

use std::fmt;

/// A NeuronCore generation (`nisa.nc_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Generation {
    /// NeuronCore-v2: Trainium1 / Inferentia2 (`nc_version.gen2`).
    Trn1,
    /// NeuronCore-v3: Trainium2 (`nc_version.gen3`).
    #[default]
    Trn2,
    /// NeuronCore-v4: Trainium3 (`nc_version.gen4`).
    Trn3,
}

/// Limits of one generation.
///
/// ```
/// use nki_spec::hw::Generation;
/// let hw = Generation::Trn2.limits();
/// assert_eq!(hw.pmax, 128);
/// assert_eq!(hw.psum_bank_bytes * hw.psum_banks, 16 * 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwLimits {
    /// Partitions of SBUF and PSUM (`nl.tile_size.pmax`).
    pub pmax: usize,
    /// SBUF bytes per partition.
    pub sbuf_bytes_per_partition: usize,
    /// PSUM banks per partition (`nl.tile_size.psum_num_banks`).
    pub psum_banks: usize,
    /// Bytes per PSUM bank per partition (512 fp32, `psum_bank_fmax_bytes`).
    pub psum_bank_bytes: usize,
    /// Largest free size of a matmul's stationary operand (`gemm_stationary_fmax`).
    pub gemm_stationary_fmax: usize,
    /// Largest free size of a matmul's moving operand with an fp32 destination.
    pub gemm_moving_fmax: usize,
    /// Largest moving free size with a bf16 destination (0 where bf16 PSUM is unsupported).
    pub gemm_moving_fmax_bf16_dst: usize,
    /// Largest square a PE transpose (`nc_transpose` on the Tensor Engine) handles.
    pub pe_transpose_max: usize,
    /// Largest square a Vector Engine transpose handles.
    pub vector_transpose_max: usize,
    /// Whether `range_select` exists.
    pub has_range_select: bool,
    /// Whether `core_barrier` (and LNC2) exists.
    pub has_core_barrier: bool,
    /// The LNC degree kernels get when nothing sets one: neuronx-cc compiles for
    /// LNC=2 on Trn2 and later (its NCC_EVRF066 error page), and trn1 has only LNC=1.
    pub default_lnc: usize,
    /// Whether matmul may write bf16 PSUM tiles.
    pub has_bf16_psum: bool,
    /// Whether `activation` accepts a scalar (not only a vector) bias.
    pub has_scalar_activation_bias: bool,
    /// Whether the hardware DGE (`dge_mode=hwdge`) exists (NeuronCore-v3 and newer).
    pub has_hwdge: bool,
    /// Whether a matmul may accumulate onto PSUM values a non-matmul instruction
    /// (`memset`, `tensor_copy`, ...) wrote; the `nc_matmul` docs call that
    /// undefined behaviour on NeuronCore-v2 and -v3.
    pub has_accumulate_onto_non_matmul_psum: bool,
}

impl HwLimits {
    /// fp32 elements per PSUM bank per partition (`nl.tile_size.psum_fmax`).
    pub const fn psum_fmax(&self) -> usize {
        self.psum_bank_bytes / 4
    }

    /// Banks a PSUM tensor of `bytes` per partition holds: NKI starts every PSUM
    /// tensor at a bank boundary, so it takes whole banks.
    pub const fn psum_banks_for(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.psum_bank_bytes)
    }

    /// PSUM bytes per partition, also the largest PSUM tensor per partition: a
    /// tensor may span consecutive banks (`psum_bank_fmax` is a per-bank limit,
    /// not a tensor's), while one matmul writes at most `gemm_moving_fmax` columns.
    pub const fn psum_bytes_per_partition(&self) -> usize {
        self.psum_banks * self.psum_bank_bytes
    }
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 3] = [Generation::Trn1, Generation::Trn2, Generation::Trn3];

    /// The limits of this generation.
    pub const fn limits(self) -> HwLimits {
        const COMMON: HwLimits = HwLimits {
            pmax: 128,
            sbuf_bytes_per_partition: 192 * 1024,
            psum_banks: 8,
            psum_bank_bytes: 2048,
            gemm_stationary_fmax: 128,
            gemm_moving_fmax: 512,
            gemm_moving_fmax_bf16_dst: 0,
            pe_transpose_max: 128,
            vector_transpose_max: 32,
            has_range_select: false,
            has_core_barrier: false,
            default_lnc: 1,
            has_bf16_psum: false,
            has_scalar_activation_bias: false,
            has_hwdge: false,
            has_accumulate_onto_non_matmul_psum: false,
        };
        match self {
            Generation::Trn1 => COMMON,
            Generation::Trn2 => HwLimits {
                sbuf_bytes_per_partition: 224 * 1024,
                has_range_select: true,
                has_core_barrier: true,
                default_lnc: 2,
                has_scalar_activation_bias: true,
                has_hwdge: true,
                ..COMMON
            },
            Generation::Trn3 => HwLimits {
                sbuf_bytes_per_partition: 256 * 1024,
                gemm_moving_fmax: 4096,
                gemm_moving_fmax_bf16_dst: 8192,
                has_range_select: true,
                has_core_barrier: true,
                default_lnc: 2,
                has_bf16_psum: true,
                has_scalar_activation_bias: true,
                has_hwdge: true,
                has_accumulate_onto_non_matmul_psum: true,
                ..COMMON
            },
        }
    }

    /// NeuronCore version number (2, 3 or 4).
    pub const fn nc_version(self) -> u32 {
        match self {
            Generation::Trn1 => 2,
            Generation::Trn2 => 3,
            Generation::Trn3 => 4,
        }
    }

    /// The `nisa.nc_version` member name (`gen2`, `gen3`, `gen4`).
    pub const fn nc_version_name(self) -> &'static str {
        match self {
            Generation::Trn1 => "gen2",
            Generation::Trn2 => "gen3",
            Generation::Trn3 => "gen4",
        }
    }

    /// Parses `trn1|trn2|trn3` or `gen2|gen3|gen4`.
    pub fn parse(name: &str) -> Option<Generation> {
        match name {
            "trn1" | "gen2" | "inf2" => Some(Generation::Trn1),
            "trn2" | "gen3" => Some(Generation::Trn2),
            "trn3" | "gen4" => Some(Generation::Trn3),
            _ => None,
        }
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Generation::Trn1 => "trn1",
            Generation::Trn2 => "trn2",
            Generation::Trn3 => "trn3",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psum_is_eight_banks_of_512_fp32() {
        for g in Generation::ALL {
            let hw = g.limits();
            assert_eq!(hw.psum_fmax(), 512);
            assert_eq!(hw.psum_bytes_per_partition(), 16 * 1024);
        }
    }

    #[test]
    fn newer_generations_only_add_capabilities() {
        let (a, b, c) = (Generation::Trn1.limits(), Generation::Trn2.limits(), Generation::Trn3.limits());
        assert!(a.sbuf_bytes_per_partition < b.sbuf_bytes_per_partition);
        assert!(b.sbuf_bytes_per_partition < c.sbuf_bytes_per_partition);
        assert!(!a.has_range_select && b.has_range_select && c.has_range_select);
        // The nc_matmul docs: accumulating onto non-matmul PSUM values is undefined on v2/v3 only.
        assert!(!a.has_accumulate_onto_non_matmul_psum && !b.has_accumulate_onto_non_matmul_psum && c.has_accumulate_onto_non_matmul_psum);
        assert!(c.gemm_moving_fmax > b.gemm_moving_fmax);
        for g in Generation::ALL {
            assert_eq!(Generation::parse(&g.to_string()), Some(g));
        }
    }
}
