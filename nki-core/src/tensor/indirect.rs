//! Indirect views: `.ap(vector_offset=)` and `.vector_select()`, whose rows
//! start at offsets held in a tensor. The offsets are read each time an instruction uses the view (the ones
//! in memory when it runs), so the view resolves to storage cells then, not when
//! it is made.

use super::{Tensor, convert_cells};
use crate::{ErrorKind, NkiError, Result};

/// The offsets of a `vector_offset` view: row r of the view starts at
/// `index[r] * stride` cells past the view's start; or of a `scalar_offset` view
/// whose dynamic start moved some rows outside the storage: row r starts at the
/// view's start plus r times its first step, and the rows outside are an error
/// or, under `oob_mode=skip`, left out when an instruction uses the view.
pub(crate) struct VectorOffset {
    /// The integer SBUF tensor holding the offsets (read column-major), or
    /// `None` for a `scalar_offset` view.
    pub index: Option<Tensor>,
    /// The `scalar_offset` value (for messages).
    pub scalar: i64,
    /// Cells per unit of offset: the step of the viewed tensor's `indirect_dim`.
    pub stride: isize,
    /// `vector_select`: the rows an offset may select (`0..n`); otherwise any
    /// offset whose row stays inside the storage.
    pub rows: Option<usize>,
}

impl Tensor {
    /// Whether the view is addressed indirectly (an `.ap(vector_offset=)` or
    /// `.vector_select()` view).
    pub fn is_indirect(&self) -> bool {
        self.rows.is_some()
    }

    /// The storage cell of each element of the view, in logical order. A
    /// `vector_offset` view reads its offsets now; a row reaching outside the
    /// storage is an error naming `op`, or, when `skip`, a row of `-1`s (cells an
    /// instruction leaves out).
    pub(crate) fn cell_indices(&self, op: &str, skip: bool) -> Result<Vec<isize>> {
        let mut out = Vec::with_capacity(self.numel());
        let Some(v) = &self.rows else {
            self.check_bounds(op)?;
            self.layout.for_each_run(|start, n, step| out.extend((0..n as isize).map(|i| start + i * step)));
            return Ok(out);
        };
        let l = &self.layout;
        let rows = l.shape[0];
        let inner = super::Layout { offset: 0, shape: l.shape[1..].to_vec(), strides: l.strides[1..].to_vec() };
        let mut inner_cells = Vec::with_capacity(inner.numel());
        inner.for_each_run(|start, n, step| inner_cells.extend((0..n as isize).map(|i| start + i * step)));
        let len = self.st.len() as isize;
        // Each row's start: from the offset tensor, or the view's own rows.
        let starts: Vec<(i64, Option<isize>)> = match &v.index {
            Some(index) => column_major(index)
                .into_iter()
                .take(rows)
                .map(|o| {
                    let selectable = v.rows.is_none_or(|n| (0..n as i64).contains(&o));
                    (o, (o as isize).checked_mul(v.stride).and_then(|m| m.checked_add(l.offset)).filter(|_| selectable))
                })
                .collect(),
            None => (0..rows).map(|r| (v.scalar, (r as isize).checked_mul(l.strides[0]).and_then(|m| m.checked_add(l.offset)))).collect(),
        };
        for (r, (o, start)) in starts.into_iter().enumerate() {
            let row: Option<Vec<isize>> =
                start.and_then(|s| inner_cells.iter().map(|&c| s.checked_add(c).filter(|x| (0..len).contains(x))).collect());
            let why = match (&v.index, v.rows) {
                _ if row.is_some() || skip => None,
                (None, _) => Some(format!("scalar_offset {o} moves row {r} of the view of '{}' outside its {len} cells", self.name())),
                (Some(index), Some(n)) => {
                    Some(format!("vector_offset {o} (from {}) selects row {o} of '{}', which has {n} rows", index.describe(), self.name()))
                }
                (Some(index), None) => Some(format!(
                    "vector_offset {o} (from {}) moves row {r} of the view of '{}' outside its {len} cells",
                    index.describe(),
                    self.name()
                )),
            };
            if let Some(why) = why {
                return Err(NkiError::new(ErrorKind::Bounds, format!("{why} (out of bounds; oob_mode=skip would skip it)")).in_op(op));
            }
            match row {
                Some(cells) => out.extend(cells),
                None => out.extend(std::iter::repeat_n(-1, inner_cells.len())),
            }
        }
        Ok(out)
    }

    /// Copies the cells `from` of `src` into the cells `to` of this tensor's
    /// storage (paired in order), converting as [`Tensor::store_cells`] does and
    /// leaving out every pair with a skipped (`-1`) side.
    pub(crate) fn copy_cells_at(&self, to: &[isize], src: &Tensor, from: &[isize], round: bool) {
        let pairs: Vec<(usize, usize)> =
            to.iter().zip(from).filter(|&(&t, &f)| t >= 0 && f >= 0).map(|(&t, &f)| (t as usize, f as usize)).collect();
        let mut cells: Vec<f32> = {
            let s = src.read();
            pairs.iter().map(|&(_, f)| s[f]).collect()
        };
        convert_cells(src.dtype(), self.dtype(), &mut cells, round);
        let mut w = self.write();
        for (&(t, _), c) in pairs.iter().zip(cells) {
            w[t] = c;
        }
    }
}

impl Tensor {
    /// The float32 values of the storage cells `at` whose `keep` is set (in order).
    pub(crate) fn values_at(&self, at: &[isize], keep: &[bool]) -> Vec<f32> {
        let mut cells: Vec<f32> = {
            let s = self.read();
            at.iter().zip(keep).filter(|&(_, &k)| k).map(|(&c, _)| s[c as usize]).collect()
        };
        convert_cells(self.dtype(), crate::Dtype::F32, &mut cells, false);
        cells
    }

    /// Writes the float32 `values` into the storage cells `at` (paired in order),
    /// rounding into this tensor's dtype as [`Tensor::store_cells`] does.
    pub(crate) fn store_values_at(&self, at: &[isize], mut values: Vec<f32>, round: bool) {
        convert_cells(crate::Dtype::F32, self.dtype(), &mut values, round);
        let mut w = self.write();
        for (&c, v) in at.iter().zip(values) {
            w[c as usize] = v;
        }
    }
}

/// The integer values of `index`, column by column for a 2-d tensor (row-major otherwise).
fn column_major(index: &Tensor) -> Vec<i64> {
    let values = index.to_i64_vec();
    match index.shape() {
        &[p, f] => (0..p * f).map(|k| values[(k % p) * f + k / p]).collect(),
        _ => values,
    }
}
