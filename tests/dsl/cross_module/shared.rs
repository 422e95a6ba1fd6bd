//! The constants, enum, bundles and helper that `cross_module`'s kernel imports.

use nki::prelude::*;

pub use items::*;

/// Items of one module, used by another.
#[nki_module]
pub mod items {
    use nki::prelude::*;

    /// Rows per tile.
    pub const TILE_ROWS: i64 = 2;
    /// Added after every map.
    pub const BIAS: f64 = 0.5;
    /// The dtype the work happens in.
    pub const WORK_DTYPE: Dtype = nl::float32;
    /// The message of the kernel's one rule.
    pub const ROWS_RULE: &str = "cross_module: the rows must be a multiple of TILE_ROWS";

    /// What a step does after its map.
    #[nki_enum]
    pub enum Sign {
        /// Keeps the sign.
        Keep,
        /// Negates.
        Flip,
    }

    /// `t * scale + offset`.
    #[nki_object]
    pub struct Affine {
        /// Multiplies.
        pub scale: f64,
        /// Added after scaling.
        pub offset: f64,
    }

    /// A map then a sign: a bundle holding a bundle.
    #[nki_object]
    pub struct Step {
        /// The map.
        pub map: Affine,
        /// The sign after it.
        pub sign: Sign,
    }

    /// `t = ±(t * step.map.scale + step.map.offset) + BIAS`.
    #[nki_helper]
    pub fn apply(t: Sbuf, step: Step) {
        nisa::tensor_scalar(t, t, nl::multiply, step.map.scale, op1 = nl::add, operand1 = step.map.offset);
        if step.sign == Sign::Flip {
            nisa::tensor_scalar(t, t, nl::multiply, -1.0);
        }
        nisa::tensor_scalar(t, t, nl::add, BIAS);
    }
}
