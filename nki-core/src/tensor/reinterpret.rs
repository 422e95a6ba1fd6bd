//! Byte views: `.view(dtype)` and `.ap(.., dtype=)`, the same bytes seen as
//! another dtype.
//!
//! Cells hold one value per element of the storage's dtype, so a reinterpreted
//! view gets its own [`Storage`] of the new dtype whose cells live in its base:
//! a read decodes the base's bytes (little-endian) into cells of the view's
//! dtype, a write encodes them back and stores the base cells whose bytes
//! changed. Tensors over a base storage keep the typed fast path: only views
//! made by `.view()` pay for the translation. A float cell becomes bytes
//! through its dtype (round to nearest even), so in fp32 precision an unrounded
//! low-precision cell rounds when its bytes are read, and a write through the
//! view leaves every base cell rounded to its dtype (as storing all the bytes
//! back would).

use super::{Layout, Storage, Tensor};
use crate::{Buffer, Dtype, NkiError, Result};
use half::{bf16, f16};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

impl Tensor {
    /// `.view(dtype)`: the same bytes as `dtype`. The last dim must be
    /// contiguous; its extent (and the other strides and the offset) scale by
    /// the element size ratio, and a wider dtype needs them to be multiples of
    /// the ratio. PSUM, indirect and already reinterpreted views are refused.
    pub fn view(&self, dtype: Dtype) -> Result<Tensor> {
        self.reinterpreted("view", dtype)
    }

    /// The view as `dtype` for `op` (`view` or `ap`); itself when the dtype is its own.
    pub(crate) fn reinterpreted(&self, op: &str, dtype: Dtype) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        self.check_direct(op)?;
        let refuse = |why: String| Err(NkiError::shape(op, why));
        if self.buffer() == Buffer::Psum {
            return refuse(format!("{} is in PSUM; only SBUF and HBM tensors can be reinterpreted", self.describe()));
        }
        if self.st.base.is_some() {
            return refuse(format!("{} is already a reinterpreted or indirect view; reinterpret the original tensor", self.describe()));
        }
        let l = &self.layout;
        if l.shape.last().is_some_and(|&n| n > 1) && l.strides.last() != Some(&1) {
            return refuse(format!(
                "the last dim of {} has stride {}; it must be contiguous to be reinterpreted",
                self.describe(),
                l.strides.last().copied().unwrap_or(0)
            ));
        }
        let (a, b) = (self.dtype().size_bytes(), dtype.size_bytes());
        let parts = if self.buffer().is_on_chip() { self.st.shape.first().copied().unwrap_or(1) } else { 1 };
        let bytes = self.st.len() / parts.max(1) * a;
        if !bytes.is_multiple_of(b) {
            return refuse(format!("{} holds {bytes} bytes per partition, not a whole number of {dtype} elements", self.describe()));
        }
        let last = l.shape.len().saturating_sub(1);
        let mut layout = Layout { offset: l.offset, shape: l.shape.clone(), strides: l.strides.clone() };
        if b <= a {
            let r = (a / b) as isize;
            layout.offset *= r;
            layout.strides.iter_mut().for_each(|s| *s *= r);
            if let Some(n) = layout.shape.last_mut() {
                *n *= r as usize;
                layout.strides[last] = 1;
            }
        } else {
            let r = (b / a) as isize;
            let whole =
                l.shape.last().is_none_or(|&n| n % r as usize == 0) && l.strides[..last].iter().all(|s| s % r == 0) && l.offset % r == 0;
            if !whole {
                return refuse(format!(
                    "{} does not split into whole {dtype} elements (the last dim, the strides and the offset must be multiples of {r})",
                    self.describe()
                ));
            }
            layout.offset /= r;
            layout.strides.iter_mut().for_each(|s| *s /= r);
            if let Some(n) = layout.shape.last_mut() {
                *n /= r as usize;
                layout.strides[last] = 1;
            }
        }
        let count = bytes / b * parts;
        let shape = if self.buffer().is_on_chip() { vec![parts, count / parts.max(1)] } else { vec![count] };
        let st = Storage::alias(Arc::clone(&self.st), dtype, &shape);
        Ok(Tensor { st, layout, rows: None })
    }
}

/// The cells of a storage for reading: its lock, the decoded cells of a
/// byte view (shared while the base is unchanged), or an indirection's cells.
pub(crate) enum Cells<'a> {
    Locked(RwLockReadGuard<'a, Vec<f32>>),
    Shared(Arc<Vec<f32>>),
    Decoded(Vec<f32>),
}

impl Deref for Cells<'_> {
    type Target = Vec<f32>;
    fn deref(&self) -> &Vec<f32> {
        match self {
            Cells::Locked(g) => g,
            Cells::Shared(v) => v,
            Cells::Decoded(v) => v,
        }
    }
}

/// A storage's bytes decoded as `dtype`, taken at its write `generation`.
pub(crate) struct Decoded {
    dtype: Dtype,
    generation: u64,
    cells: Arc<Vec<f32>>,
}

/// What a decoded view held when it was taken, to write back only what changed.
pub(crate) enum Before {
    /// The base's bytes (a byte view).
    Bytes(Vec<u8>),
    /// The base cells of the view's elements and their values (an indirection).
    Cells(Vec<usize>, Vec<f32>),
}

/// The cells of a storage for writing: its lock, or the decoded cells of a
/// reinterpreted view, encoded back into the base when dropped.
pub(crate) enum CellsMut<'a> {
    /// The storage's own cells and its write generation, bumped on drop.
    Locked(RwLockWriteGuard<'a, Vec<f32>>, &'a AtomicU64),
    Decoded {
        st: &'a Storage,
        cells: Vec<f32>,
        before: Before,
    },
}

impl Deref for CellsMut<'_> {
    type Target = Vec<f32>;
    fn deref(&self) -> &Vec<f32> {
        match self {
            CellsMut::Locked(g, _) => g,
            CellsMut::Decoded { cells, .. } => cells,
        }
    }
}

impl DerefMut for CellsMut<'_> {
    fn deref_mut(&mut self) -> &mut Vec<f32> {
        match self {
            CellsMut::Locked(g, _) => g,
            CellsMut::Decoded { cells, .. } => cells,
        }
    }
}

impl Drop for CellsMut<'_> {
    fn drop(&mut self) {
        let (st, cells, before) = match self {
            // Still under the lock: no reader can take the new cells at the old generation.
            CellsMut::Locked(_, generation) => {
                generation.fetch_add(1, Ordering::Release);
                return;
            }
            CellsMut::Decoded { st, cells, before } => (st, cells, before),
        };
        let Some(base) = &st.base else { return };
        match before {
            Before::Bytes(before) => {
                let after = to_bytes(st.dtype, cells);
                let size = base.dtype.size_bytes();
                let mut w = base.cells.write().unwrap_or_else(|e| e.into_inner());
                for (i, (new, old)) in after.chunks_exact(size).zip(before.chunks_exact(size)).enumerate() {
                    if new != old {
                        w[i] = from_bytes(base.dtype, new);
                    } else if let Some(cell) = w.get_mut(i) {
                        // Like a store of every cell's bytes, an untouched cell keeps
                        // its value rounded to its dtype (unrounded only in fp32 precision).
                        *cell = crate::dtype::round_f32(base.dtype, *cell);
                    }
                }
                base.generation.fetch_add(1, Ordering::Release);
            }
            Before::Cells(at, old) => {
                let mut w = base.cells.write().unwrap_or_else(|e| e.into_inner());
                for ((&c, new), old) in at.iter().zip(cells.iter()).zip(old.iter()) {
                    if let Some(cell) = w.get_mut(c).filter(|_| new.to_bits() != old.to_bits()) {
                        *cell = *new;
                    }
                }
                base.generation.fetch_add(1, Ordering::Release);
            }
        }
    }
}

impl Storage {
    /// The cells of this storage for reading (decoded from the base's bytes for a reinterpreted view).
    pub(crate) fn read_cells(&self) -> Cells<'_> {
        match (&self.base, &self.indirection) {
            (None, _) => Cells::Locked(self.cells.read().unwrap_or_else(|e| e.into_inner())),
            (Some(base), None) => Cells::Shared(base.decoded_as(self.dtype)),
            (Some(base), Some(map)) => Cells::Decoded(self.gathered(base, map).1),
        }
    }

    /// This storage's bytes as `dtype` cells: decoded once per write
    /// generation, since a kernel reads a large tensor through a byte view
    /// tile by tile (each read would otherwise decode all of it).
    fn decoded_as(&self, dtype: Dtype) -> Arc<Vec<f32>> {
        let generation = self.generation.load(Ordering::Acquire);
        let mut cache = self.decoded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = cache.as_ref().filter(|d| d.dtype == dtype && d.generation == generation) {
            return Arc::clone(&d.cells);
        }
        let cells = Arc::new(decode(dtype, &to_bytes(self.dtype, &self.read_cells())));
        *cache = Some(Decoded { dtype, generation, cells: Arc::clone(&cells) });
        cells
    }

    /// The base cells of an indirection's elements and their values; an offset
    /// that moved outside the rows since the instruction checked its operands
    /// reads NaN and writes nothing.
    fn gathered(&self, base: &Storage, map: &super::tensor_indirection::Indirection) -> (Vec<usize>, Vec<f32>) {
        match map.cells() {
            Ok(at) => {
                let b = base.read_cells();
                let vals = at.iter().map(|&c| b.get(c).copied().unwrap_or(f32::NAN)).collect();
                (at, vals)
            }
            Err(_) => (Vec::new(), vec![f32::NAN; self.len()]),
        }
    }

    /// The cells of this storage for writing (written back into the base when dropped).
    pub(crate) fn write_cells(&self) -> CellsMut<'_> {
        match (&self.base, &self.indirection) {
            (None, _) => CellsMut::Locked(self.cells.write().unwrap_or_else(|e| e.into_inner()), &self.generation),
            (Some(base), None) => {
                let before = to_bytes(base.dtype, &base.read_cells());
                CellsMut::Decoded { st: self, cells: decode(self.dtype, &before), before: Before::Bytes(before) }
            }
            (Some(base), Some(map)) => {
                let (at, vals) = self.gathered(base, map);
                CellsMut::Decoded { st: self, cells: vals.clone(), before: Before::Cells(at, vals) }
            }
        }
    }
}

/// The little-endian bytes of `cells` of `dtype` (floats through their dtype's encoding).
fn to_bytes(dtype: Dtype, cells: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cells.len() * dtype.size_bytes());
    for &c in cells {
        match dtype {
            Dtype::F32 => out.extend_from_slice(&c.to_le_bytes()),
            Dtype::Bf16 => out.extend_from_slice(&bf16::from_f32(c).to_le_bytes()),
            Dtype::F16 => out.extend_from_slice(&f16::from_f32(c).to_le_bytes()),
            Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 => out.push(fp8_code(dtype, c)),
            _ => out.extend_from_slice(&dtype.cell_to_i64(c).to_le_bytes()[..dtype.size_bytes()]),
        }
    }
    out
}

/// The cells of `dtype` whose little-endian bytes are `bytes`.
fn decode(dtype: Dtype, bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(dtype.size_bytes()).map(|b| from_bytes(dtype, b)).collect()
}

/// The little-endian bytes of one cell of `dtype`.
pub(crate) fn bytes_of_cell(dtype: Dtype, cell: f32) -> Vec<u8> {
    to_bytes(dtype, &[cell])
}

/// One cell of `dtype` from its little-endian bytes.
pub(crate) fn cell_of_bytes(dtype: Dtype, bytes: &[u8]) -> f32 {
    from_bytes(dtype, bytes)
}

/// One cell of `dtype` from its little-endian bytes (integers sign- or zero-extended).
fn from_bytes(dtype: Dtype, b: &[u8]) -> f32 {
    let mut wide = [0u8; 8];
    wide[..b.len()].copy_from_slice(b);
    let bits = u64::from_le_bytes(wide);
    match dtype {
        Dtype::F32 => f32::from_bits(bits as u32),
        Dtype::Bf16 => bf16::from_bits(bits as u16).to_f32(),
        Dtype::F16 => f16::from_bits(bits as u16).to_f32(),
        Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 => fp8_value(dtype, bits as u8),
        Dtype::I32 => dtype.i64_to_cell(i64::from(bits as u32 as i32)),
        Dtype::I16 => dtype.i64_to_cell(i64::from(bits as u16 as i16)),
        Dtype::I8 => dtype.i64_to_cell(i64::from(bits as u8 as i8)),
        _ => dtype.i64_to_cell(bits as i64),
    }
}

/// The value of the 8-bit float code `code` of `dtype` (the shared decoder's),
/// a NaN code as the NaN that carries it.
fn fp8_value(dtype: Dtype, code: u8) -> f32 {
    match crate::dtype::fp8_decode(dtype, code) {
        Some(v) if !v.is_nan() => v,
        _ => nan_of_code(code),
    }
}

/// The quiet f32 NaN that carries the 8-bit NaN `code` in its low byte, so that
/// bytes read through an 8-bit float view and written back unchanged (a DMA of
/// packed bytes, such as an fp32 scale stored as four `float8_e4m3` elements)
/// keep every NaN code rather than collapsing them to one.
const fn nan_of_code(code: u8) -> f32 {
    f32::from_bits(FP8_NAN_BITS | code as u32)
}

/// The high bits of [`nan_of_code`]'s NaNs.
const FP8_NAN_BITS: u32 = 0x7fc0_0000;

/// The 8-bit float code of `c` rounded to `dtype`: a NaN from [`nan_of_code`]
/// gives back its code, any other NaN the all-ones code.
fn fp8_code(dtype: Dtype, c: f32) -> u8 {
    let v = crate::dtype::round_f32(dtype, c);
    if v.is_nan() {
        let (bits, carried) = (v.to_bits(), v.to_bits() as u8);
        if bits & !0xff == FP8_NAN_BITS && fp8_value(dtype, carried).is_nan() {
            return carried;
        }
        return 0x7f | if v.is_sign_negative() { 0x80 } else { 0 };
    }
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    crate::dtype::fp8_encode(dtype, v.abs()).map_or(0x7f, |k| k | sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fp8_code_round_trips() {
        for d in [Dtype::Fp8E4m3, Dtype::Fp8E4m3Fn, Dtype::Fp8E5m2] {
            // NaN codes too: their NaN carries the code.
            for k in 0u8..=255 {
                assert_eq!(fp8_code(d, fp8_value(d, k)), k, "{d} code {k:#x}");
            }
            assert_eq!(fp8_code(d, f32::NAN), 0x7f, "{d}: a NaN of arithmetic is the all-ones code");
        }
        assert_eq!(fp8_value(Dtype::Fp8E4m3Fn, 0x7e), 448.0);
        assert_eq!(fp8_value(Dtype::Fp8E4m3, 0x77), 240.0);
        assert_eq!(fp8_value(Dtype::Fp8E5m2, 0x7b), 57344.0);
    }
}
