//! Scalar-or-vector operands (`operand0=`, `scale=`, `bias=`, ...).

use super::exec::read_tile;
use super::tile::TileView;
use crate::{NkiError, Result, Tensor};

/// An operand that is either a compile-time scalar or a `(P, 1)` tile holding one
/// value per partition, broadcast along the free dim.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A constant.
    Scalar(f64),
    /// A per-partition column.
    Tensor(&'a Tensor),
}

impl<'a> Operand<'a> {
    /// The tile an operand reads, if it is one.
    pub(crate) fn tensor(self) -> Option<&'a Tensor> {
        match self {
            Operand::Scalar(_) => None,
            Operand::Tensor(t) => Some(t),
        }
    }
}

impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::Scalar(v)
    }
}

impl From<i64> for Operand<'_> {
    fn from(v: i64) -> Self {
        Operand::Scalar(v as f64)
    }
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

/// A value that reads as an operand through a reference: what kernels pass
/// where the macro cannot see the Rust type (a helper's result, a tile or a
/// number).
pub trait AsOperand {
    /// The operand that reads `self`.
    fn as_operand(&self) -> Operand<'_>;
}

impl AsOperand for Tensor {
    fn as_operand(&self) -> Operand<'_> {
        Operand::Tensor(self)
    }
}

impl AsOperand for f64 {
    fn as_operand(&self) -> Operand<'_> {
        Operand::Scalar(*self)
    }
}

impl AsOperand for i64 {
    fn as_operand(&self) -> Operand<'_> {
        Operand::Scalar(*self as f64)
    }
}

impl<T: AsOperand + ?Sized> AsOperand for &T {
    fn as_operand(&self) -> Operand<'_> {
        (**self).as_operand()
    }
}

/// The values of an operand for a tile of `np` partitions.
#[derive(Clone, Debug)]
pub(crate) enum Column {
    Scalar(f32),
    PerPartition(Vec<f32>),
}

impl Column {
    /// The value for partition row `p`.
    #[inline]
    pub(crate) fn at(&self, p: usize) -> f32 {
        match self {
            Column::Scalar(v) => *v,
            Column::PerPartition(v) => v[p],
        }
    }
}

/// Reads an operand for an op over `np` partitions; `role` names it in messages.
pub(crate) fn column(op: &'static str, role: &str, o: Operand<'_>, np: usize) -> Result<Column> {
    match o {
        Operand::Scalar(v) => Ok(Column::Scalar(v as f32)),
        Operand::Tensor(t) => {
            let tile = TileView::of(op, role, t)?;
            if tile.np != np || tile.nf != 1 {
                return Err(NkiError::shape(
                    op,
                    format!(
                        "{role} {} must be a ({np}, 1) column (one value per partition), it is {} partitions x {} elements",
                        t.describe(),
                        tile.np,
                        tile.nf
                    ),
                ));
            }
            Ok(Column::PerPartition(read_tile(t, &tile)))
        }
    }
}
