//! Element counts of shapes, checked before anything is allocated.
//!
//! A shape comes from a caller or a file header, so its product can exceed what a
//! `usize` holds (and wrap to a small number) or what an allocation of 32-bit
//! cells can address. Every tensor constructor goes through [`checked_numel`],
//! so such a shape is an `Err`, never a wrapped count or a panic.

use crate::{NkiError, Result};

/// Bytes of one storage cell: every element sits in a 32-bit slot.
pub const CELL_BYTES: usize = std::mem::size_of::<f32>();

/// Most cells one allocation may hold: a `Vec` addresses at most `isize::MAX` bytes.
pub const MAX_CELLS: usize = isize::MAX as usize / CELL_BYTES;

/// The number of elements of `shape`, or an error when the product overflows or
/// the cells would not fit in one allocation.
///
/// The product of the non-zero dims is what is checked, so that a shape with a
/// zero dim still has representable row-major strides.
///
/// ```
/// use nki_core::tensor::checked_numel;
/// assert_eq!(checked_numel(&[2, 3, 4]).unwrap(), 24);
/// assert_eq!(checked_numel(&[]).unwrap(), 1); // a scalar
/// assert!(checked_numel(&[1 << 32, 1 << 32]).is_err()); // wraps a u64
/// ```
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    let spanned = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d.max(1))).filter(|&n| n <= MAX_CELLS);
    let spanned = spanned.ok_or_else(|| {
        NkiError::argument("shape", format!("{shape:?}"), &format!("holds more than {MAX_CELLS} elements (32-bit cells)"))
    })?;
    Ok(if shape.contains(&0) { 0 } else { spanned })
}

/// An empty cell buffer with room for `n` cells, or an error naming `what` when
/// the memory cannot be had (rather than aborting the process).
pub(crate) fn reserve_cells(n: usize, what: &str) -> Result<Vec<f32>> {
    let mut cells = Vec::new();
    cells.try_reserve_exact(n).map_err(|_| {
        NkiError::argument(what, format!("{n} elements"), &format!("cannot allocate {} bytes of cells", n.saturating_mul(CELL_BYTES)))
    })?;
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_that_wrap_or_outgrow_an_allocation_are_errors() {
        // 2^32 · 2^32 wraps to 0 in u64 arithmetic; 3 · 6148914691236517206 wraps to 2.
        for shape in [&[1usize << 32, 1 << 32][..], &[3, 6_148_914_691_236_517_206], &[usize::MAX, 2], &[MAX_CELLS + 1]] {
            let e = checked_numel(shape).unwrap_err();
            assert!(e.message.contains("invalid shape") && e.message.contains("more than"), "{e}");
        }
        // A zero dim makes no elements, but the other dims must still have representable strides.
        assert_eq!(checked_numel(&[1 << 20, 0, 3]).unwrap(), 0);
        assert!(checked_numel(&[0, 1 << 32, 1 << 32]).is_err());
        assert_eq!(checked_numel(&[MAX_CELLS]).unwrap(), MAX_CELLS);
        assert_eq!(checked_numel(&[7, 1, 9]).unwrap(), 63);
    }

    #[test]
    fn every_constructor_refuses_a_wrapping_shape() {
        use crate::language::{NdarrayOpts, ndarray};
        use crate::{Buffer, Dtype, Launch, Tensor};
        // 2^32 · 2^32 wraps to 0, which an empty data slice would otherwise "fill".
        let wraps = [1usize << 32, 1 << 32];
        for e in [
            Tensor::from_f32(&wraps, &[], Dtype::F32).unwrap_err(),
            Tensor::from_i64(&wraps, &[], Dtype::I32).unwrap_err(),
            Tensor::zeros(&wraps, Dtype::F32).unwrap_err(),
        ] {
            assert_eq!(e.message, format!("invalid shape = {wraps:?}: holds more than {MAX_CELLS} elements (32-bit cells)"));
        }
        // Representable but beyond memory: an error, not an abort.
        assert!(Tensor::zeros(&[MAX_CELLS], Dtype::F32).unwrap_err().message.contains("cannot allocate"));
        let e = Launch::new()
            .run(|ctx| ndarray(ctx, &[1 << 32, 1 << 32], Dtype::F32, NdarrayOpts { buffer: Some(Buffer::SharedHbm), ..Default::default() }))
            .unwrap_err();
        assert!(e.to_string().starts_with("nl.ndarray") && e.message.contains("holds more than"), "{e}");
        assert_eq!(Tensor::from_f32(&[2, 0, 3], &[], Dtype::F32).unwrap().numel(), 0);
    }

    #[test]
    fn reserving_more_than_memory_is_an_error_not_an_abort() {
        let e = reserve_cells(MAX_CELLS, "data").unwrap_err();
        assert!(e.message.contains("cannot allocate"), "{e}");
        assert!(reserve_cells(16, "data").unwrap().capacity() >= 16);
    }
}
