//! The two numeric models of the emulator.

use std::fmt;

/// How values are rounded when ops write them.
///
/// * `Hardware` (default): every write rounds to the destination tile's dtype, as
///   the device does (bf16 tiles hold bf16 values, PSUM accumulates in fp32, DMA
///   casts through fp32).
/// * `Fp32`: kernel writes keep full `f32` values whatever the declared dtype, so an
///   algorithmic bug can be told apart from precision loss. Integer dtypes stay integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Round to each tile's dtype where the hardware does.
    #[default]
    Hardware,
    /// Keep every on-chip and kernel-written value in f32.
    Fp32,
}

impl Precision {
    /// Parses `hardware` or `fp32`.
    pub fn parse(s: &str) -> Option<Precision> {
        match s {
            "hardware" | "hw" => Some(Precision::Hardware),
            "fp32" | "f32" => Some(Precision::Fp32),
            _ => None,
        }
    }

    /// Whether writes round to the destination dtype.
    pub const fn rounds(self) -> bool {
        matches!(self, Precision::Hardware)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::Hardware => "hardware",
            Precision::Fp32 => "fp32",
        })
    }
}
