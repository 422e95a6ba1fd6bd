//! View constructors: indexing, reshape, access patterns, broadcast, select, slice.
//!
//! On-chip tensors (SBUF/PSUM) keep dim 0 as the partition dim: an integer index
//! on it keeps a unit partition dim, and it can never be broadcast, expanded or
//! reshaped away. HBM tensors behave like NumPy arrays.

use super::{Idx, Layout, Tensor, row_major_strides};
use crate::{ErrorKind, NkiError, Result};

fn bounds(msg: String) -> NkiError {
    NkiError::new(ErrorKind::Bounds, msg)
}

impl Tensor {
    /// NumPy-style indexing: `t[i, a:b, :]`. Bounds outside the dimension are an error.
    ///
    /// An integer drops its dim, except on chip: there it keeps a unit partition
    /// dim, and a view whose free dims are all dropped keeps a unit last dim, so
    /// `t[:n, g]` is an `(n, 1)` column.
    pub fn index(&self, spec: &[Idx]) -> Result<Tensor> {
        let l = &self.layout;
        if spec.len() > l.shape.len() {
            return Err(bounds(format!("{} indices given for the {}-d tensor '{}' {:?}", spec.len(), l.shape.len(), self.name(), l.shape)));
        }
        let on_chip = self.buffer().is_on_chip();
        let mut out = Layout { offset: l.offset, shape: Vec::new(), strides: Vec::new() };
        for (d, (&n, &stride)) in l.shape.iter().zip(&l.strides).enumerate() {
            match spec.get(d).copied().unwrap_or(Idx::Full) {
                Idx::At(i) => {
                    let p = if i < 0 { i + n as i64 } else { i };
                    if p < 0 || p >= n as i64 {
                        return Err(bounds(format!("index {i} is out of range for dim {d} of '{}' {:?}", self.name(), l.shape)));
                    }
                    out.offset += p as isize * stride;
                    if on_chip && d == 0 {
                        out.shape.push(1);
                        out.strides.push(stride);
                    }
                }
                Idx::Full => {
                    out.shape.push(n);
                    out.strides.push(stride);
                }
                Idx::Range { start, stop, step } => {
                    let norm = |v: i64| if v < 0 { v + n as i64 } else { v };
                    let s = norm(start.unwrap_or(0));
                    let e = norm(stop.unwrap_or(n as i64));
                    if step < 1 || s < 0 || e > n as i64 || s > e {
                        return Err(bounds(format!(
                            "slice {}:{}:{step} is out of range for dim {d} (extent {n}) of '{}' {:?}",
                            start.map_or(String::new(), |v| v.to_string()),
                            stop.map_or(String::new(), |v| v.to_string()),
                            self.name(),
                            l.shape
                        )));
                    }
                    out.offset += s as isize * stride;
                    out.shape.push(((e - s + step - 1) / step) as usize);
                    out.strides.push(stride * step as isize);
                }
            }
        }
        // On chip a view stays at least 2-d: dropping every free dim leaves a
        // (P, 1) column, as `t[:n, g]` gives in NKI.
        if on_chip && out.shape.len() < 2 && l.shape.len() >= 2 {
            out.shape.push(1);
            out.strides.push(1);
        }
        Ok(self.with_layout(out))
    }

    /// A view with a new shape over the same elements (the view must be contiguous;
    /// on-chip views must keep their partition count).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let l = &self.layout;
        let n: usize = shape.iter().product();
        if n != l.numel() {
            return Err(NkiError::shape(
                "reshape",
                format!("cannot reshape '{}' {:?} ({} elements) to {shape:?} ({n} elements)", self.name(), l.shape, l.numel()),
            ));
        }
        if self.buffer().is_on_chip() {
            if shape.first() != l.shape.first() {
                return Err(NkiError::shape(
                    "reshape",
                    format!("reshape of on-chip '{}' {:?} to {shape:?} must keep the partition dim {}", self.name(), l.shape, l.shape[0]),
                ));
            }
            let free = Layout { offset: 0, shape: l.shape[1..].to_vec(), strides: l.strides[1..].to_vec() };
            if free.numel() > 1 && free.contiguous_start().is_none() {
                return Err(NkiError::shape(
                    "reshape",
                    format!("the free dims of '{}' {:?} are not contiguous, so it cannot be reshaped", self.name(), l.shape),
                ));
            }
            let mut strides = vec![l.strides[0]];
            strides.extend(row_major_strides(&shape[1..]));
            return Ok(self.with_layout(Layout { offset: l.offset, shape: shape.to_vec(), strides }));
        }
        if l.numel() > 1 && l.contiguous_start().is_none() {
            return Err(NkiError::shape(
                "reshape",
                format!("view of '{}' {:?} is not contiguous, so it cannot be reshaped", self.name(), l.shape),
            ));
        }
        Ok(self.with_layout(Layout { offset: l.offset, shape: shape.to_vec(), strides: row_major_strides(shape) }))
    }

    /// `.ap(pattern, offset, scalar_offset, indirect_dim)`: an explicit access
    /// pattern `[[step, count], ...]` over the storage, in elements of the row-major
    /// allocation, starting `offset` (default 0) cells past this view's start (so
    /// on a whole tensor `offset` is absolute); a dynamic
    /// `scalar_offset` value moves the start by `value` times this view's step on
    /// dim `indirect_dim`. For on-chip tensors the first pair is the partition
    /// dim, whose step is the allocation's elements per partition.
    pub fn ap(&self, pattern: &[[i64; 2]], offset: Option<i64>, dynamic_offset: Option<i64>, indirect_dim: usize) -> Result<Tensor> {
        let mut base = self.ap_start(pattern, offset)?;
        let Some(v) = dynamic_offset else {
            let t = self.with_layout(pattern_layout(base, pattern));
            t.check_bounds("access pattern")?;
            return Ok(t);
        };
        let stride = self.indirect_stride(indirect_dim)?;
        base = stride.checked_mul(v as isize).and_then(|m| base.checked_add(m)).ok_or_else(|| {
            NkiError::shape("ap", format!("scalar_offset {v} moves the view of '{}' beyond the addressable cells", self.name()))
        })?;
        let mut t = self.with_layout(pattern_layout(base, pattern));
        if t.check_bounds("access pattern").is_err() {
            // A dynamic start past the storage: the rows outside are an error, or
            // skipped under oob_mode=skip, when an instruction uses the view.
            t.rows = Some(std::sync::Arc::new(super::VectorOffset { index: None, scalar: v, stride, rows: None }));
        }
        Ok(t)
    }

    /// `.ap(pattern, offset, vector_offset=, indirect_dim)`: the access pattern of
    /// [`Tensor::ap`] whose first dim is indirect: its element r starts at
    /// `offsets[r]` times this view's step on dim `indirect_dim` (the pattern's own
    /// step on that dim is not added). The offsets are the values of the integer
    /// SBUF tensor `vector_offset` in column-major order, read when a DMA uses the
    /// view, which is the only use such a view has.
    pub fn ap_vector_offset(
        &self,
        pattern: &[[i64; 2]],
        offset: Option<i64>,
        vector_offset: &Tensor,
        indirect_dim: usize,
    ) -> Result<Tensor> {
        let base = self.ap_start(pattern, offset)?;
        let stride = self.indirect_stride(indirect_dim)?;
        let rows = pattern[0][1] as usize;
        if vector_offset.buffer() != crate::Buffer::Sbuf || vector_offset.dtype().is_float() || vector_offset.numel() < rows {
            return Err(NkiError::shape(
                "ap",
                format!(
                    "vector_offset must be an integer SBUF tensor with at least {rows} values (one per row), got {}",
                    vector_offset.describe()
                ),
            ));
        }
        let mut t = self.with_layout(pattern_layout(base, pattern));
        t.rows = Some(std::sync::Arc::new(super::VectorOffset { index: Some(vector_offset.clone()), scalar: 0, stride, rows: None }));
        Ok(t)
    }

    /// `.vector_select(dim, vector_offset)`: an HBM view whose partition p is row
    /// `vector_offset[p]` of dim 0 (`dim` must be 0), the offsets read from the
    /// integer `(P, 1)` SBUF tensor when a DMA uses the view.
    pub fn vector_select(&self, dim: usize, vector_offset: &Tensor) -> Result<Tensor> {
        const OP: &str = "vector_select";
        self.check_dim(OP, dim)?;
        self.check_direct(OP)?;
        if dim != 0 || self.buffer().is_on_chip() {
            return Err(NkiError::shape(OP, format!("vector_select takes dim 0 of an HBM tensor, got dim {dim} of {}", self.describe())));
        }
        let rows = vector_offset.shape().first().copied().unwrap_or(0);
        if vector_offset.buffer() != crate::Buffer::Sbuf || vector_offset.dtype().is_float() || vector_offset.numel() != rows {
            return Err(NkiError::shape(
                OP,
                format!(
                    "vector_offset must be an integer (P, 1) SBUF tensor with one offset per partition, got {}",
                    vector_offset.describe()
                ),
            ));
        }
        let l = &self.layout;
        let mut layout = l.clone();
        layout.shape[0] = rows;
        layout.strides[0] = 0;
        let mut t = self.with_layout(layout);
        t.rows = Some(std::sync::Arc::new(super::VectorOffset {
            index: Some(vector_offset.clone()),
            scalar: 0,
            stride: l.strides[0],
            rows: Some(l.shape[0]),
        }));
        Ok(t)
    }

    /// The view as an access pattern `[[step, count], ...]`, one pair per dim
    /// (steps in cells of the allocation, as `.ap()` takes them).
    pub fn get_pattern(&self) -> Vec<[i64; 2]> {
        self.layout.strides.iter().zip(&self.layout.shape).map(|(&s, &n)| [s as i64, n as i64]).collect()
    }

    /// The checked pattern's start: this view's start plus `offset` (default 0).
    fn ap_start(&self, pattern: &[[i64; 2]], offset: Option<i64>) -> Result<isize> {
        if pattern.is_empty() || pattern.iter().any(|&[_, c]| c < 1) {
            return Err(NkiError::shape(
                "ap",
                format!("access pattern {pattern:?} on '{}' needs at least one [step, count] pair with count >= 1", self.name()),
            ));
        }
        // On chip the partitions are physical: the docs' "Restriction on
        // SBUF/PSUM Tensors" makes the partition step the allocation's whole free
        // size (a different step would stride through the middle of partitions).
        let [step, count] = pattern[0];
        if self.buffer().is_on_chip() && count > 1 && usize::try_from(step).ok() != Some(self.partition_cells()) {
            return Err(NkiError::shape("ap", partition_step_message(pattern, self.name(), self.partition_cells())));
        }
        let o = offset.unwrap_or(0);
        isize::try_from(o)
            .ok()
            .and_then(|o| self.layout.offset.checked_add(o))
            .ok_or_else(|| NkiError::shape("ap", format!("offset={o} moves the view of '{}' beyond the addressable cells", self.name())))
    }

    /// This view's step on dim `indirect_dim`, the unit of a scalar or vector offset.
    fn indirect_stride(&self, indirect_dim: usize) -> Result<isize> {
        self.layout.strides.get(indirect_dim).copied().ok_or_else(|| {
            NkiError::shape("ap", format!("indirect_dim {indirect_dim} is not a dim of '{}' {:?}", self.name(), self.shape()))
        })
    }

    /// Repeats the unit dim `dim` `size` times without copying.
    pub fn broadcast(&self, dim: usize, size: usize) -> Result<Tensor> {
        self.check_dim("broadcast", dim)?;
        if self.buffer().is_on_chip() && dim == 0 {
            return Err(NkiError::shape("broadcast", format!("the partition dim of '{}' cannot be broadcast", self.name())));
        }
        if self.layout.shape[dim] != 1 {
            return Err(NkiError::shape(
                "broadcast",
                format!(
                    "dim {dim} of '{}' {:?} has extent {}, only a unit dim can be broadcast",
                    self.name(),
                    self.shape(),
                    self.shape()[dim]
                ),
            ));
        }
        let mut l = self.layout.clone();
        l.shape[dim] = size;
        l.strides[dim] = 0;
        Ok(self.with_layout(l))
    }

    /// Inserts a unit dim before `dim`.
    pub fn expand_dim(&self, dim: usize) -> Result<Tensor> {
        if dim > self.ndim() || (self.buffer().is_on_chip() && dim == 0) {
            return Err(NkiError::shape(
                "expand_dim",
                format!("cannot insert a dim at position {dim} of '{}' {:?}", self.name(), self.shape()),
            ));
        }
        let mut l = self.layout.clone();
        l.shape.insert(dim, 1);
        l.strides.insert(dim, 0);
        Ok(self.with_layout(l))
    }

    /// Takes position `index` of `dim` and drops the dim.
    pub fn select(&self, dim: usize, index: i64) -> Result<Tensor> {
        self.check_dim("select", dim)?;
        if self.buffer().is_on_chip() && dim == 0 {
            return Err(NkiError::shape("select", format!("the partition dim of '{}' cannot be selected away", self.name())));
        }
        let mut spec = vec![Idx::Full; dim];
        spec.push(Idx::At(index));
        self.index(&spec)
    }

    /// `start:end:step` along `dim`.
    pub fn slice(&self, dim: usize, start: i64, end: i64, step: i64) -> Result<Tensor> {
        self.check_dim("slice", dim)?;
        let mut spec = vec![Idx::Full; dim];
        spec.push(Idx::range(start, end, step));
        self.index(&spec)
    }

    /// The same elements with the dims in the order `dims` (a permutation of
    /// `0..ndim`; on-chip tensors keep the partition dim first).
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        let mut seen = vec![false; self.ndim()];
        let valid = dims.len() == self.ndim() && dims.iter().all(|&d| d < seen.len() && !std::mem::replace(&mut seen[d], true));
        if !valid {
            return Err(NkiError::shape(
                "permute",
                format!("{dims:?} is not a permutation of the {} dims of '{}'", self.ndim(), self.name()),
            ));
        }
        if self.buffer().is_on_chip() && dims.first() != Some(&0) {
            return Err(NkiError::shape("permute", format!("the partition dim of '{}' must stay first, got {dims:?}", self.name())));
        }
        let l = &self.layout;
        let layout = Layout {
            offset: l.offset,
            shape: dims.iter().map(|&d| l.shape[d]).collect(),
            strides: dims.iter().map(|&d| l.strides[d]).collect(),
        };
        Ok(self.with_layout(layout))
    }

    /// Drops the unit dim `dim`.
    pub fn squeeze_dim(&self, dim: usize) -> Result<Tensor> {
        self.check_dim("squeeze_dim", dim)?;
        if self.buffer().is_on_chip() && dim == 0 {
            return Err(NkiError::shape("squeeze_dim", format!("the partition dim of '{}' cannot be squeezed", self.name())));
        }
        if self.layout.shape[dim] != 1 {
            return Err(NkiError::shape("squeeze_dim", format!("dim {dim} of '{}' {:?} is not of size 1", self.name(), self.shape())));
        }
        let mut l = self.layout.clone();
        l.shape.remove(dim);
        l.strides.remove(dim);
        Ok(self.with_layout(l))
    }

    /// Splits dim `dim` into the dims `shape` (one entry may be `-1`, inferred
    /// from the others), each a row-major subdivision of the dim's step. On chip
    /// the partition dim cannot be split.
    pub fn reshape_dim(&self, dim: usize, shape: &[i64]) -> Result<Tensor> {
        self.check_dim("reshape_dim", dim)?;
        self.check_direct("reshape_dim")?;
        let n = self.layout.shape[dim];
        let sizes = split_sizes(shape, n).ok_or_else(|| {
            NkiError::shape(
                "reshape_dim",
                format!(
                    "shape {shape:?} (positive sizes and at most one -1) does not split dim {dim} of '{}' {:?} (extent {n})",
                    self.name(),
                    self.shape()
                ),
            )
        })?;
        if self.buffer().is_on_chip() && dim == 0 && sizes.len() != 1 {
            return Err(NkiError::shape("reshape_dim", format!("the partition dim of on-chip '{}' cannot be split", self.name())));
        }
        let step = self.layout.strides[dim];
        let mut l = self.layout.clone();
        l.shape.splice(dim..=dim, sizes.iter().copied());
        l.strides.splice(dim..=dim, row_major_strides(&sizes).into_iter().map(|s| s * step));
        Ok(self.with_layout(l))
    }

    /// Merges dims `start..=end` into one; they must be laid out contiguously
    /// relative to each other (each dim's stride the next one's stride times extent).
    pub fn flatten_dims(&self, start: usize, end: usize) -> Result<Tensor> {
        self.check_dim("flatten_dims", end)?;
        if start > end || (self.buffer().is_on_chip() && start == 0) {
            return Err(NkiError::shape(
                "flatten_dims",
                format!(
                    "cannot merge dims {start}..={end} of '{}' {:?} (on-chip tensors keep the partition dim)",
                    self.name(),
                    self.shape()
                ),
            ));
        }
        let l = &self.layout;
        let mergeable = (start..end).all(|d| l.shape[d + 1] == 1 || l.strides[d] == l.strides[d + 1] * l.shape[d + 1] as isize);
        if !mergeable {
            return Err(NkiError::shape(
                "flatten_dims",
                format!(
                    "dims {start}..={end} of '{}' (strides {:?}) are not contiguous in memory, so they cannot merge into one view dim",
                    self.name(),
                    l.strides
                ),
            ));
        }
        let mut out = l.clone();
        let merged: usize = l.shape[start..=end].iter().product();
        out.shape.splice(start..=end, [merged]);
        out.strides.splice(start..=end, [l.strides[end]]);
        Ok(self.with_layout(out))
    }

    /// An indirect view is resolved by the instruction that uses it; it cannot be viewed again.
    pub(super) fn check_direct(&self, op: &str) -> Result<()> {
        if self.is_indirect() {
            return Err(NkiError::shape(op, format!("'{}' is an indirect (vector_offset) view; it cannot be viewed again", self.name())));
        }
        Ok(())
    }

    fn check_dim(&self, op: &str, dim: usize) -> Result<()> {
        if dim >= self.ndim() {
            return Err(NkiError::shape(op, format!("dim {dim} does not exist in '{}' {:?}", self.name(), self.shape())));
        }
        Ok(())
    }
}

/// The sizes `shape` with its `-1` (at most one) inferred so they hold `n`
/// elements; `None` when they cannot.
fn split_sizes(shape: &[i64], n: usize) -> Option<Vec<usize>> {
    let free = shape.iter().filter(|&&k| k == -1).count();
    if free > 1 || shape.iter().any(|&k| k < 1 && k != -1) {
        return None;
    }
    let known = shape.iter().filter(|&&k| k != -1).try_fold(1usize, |acc, &k| acc.checked_mul(usize::try_from(k).ok()?))?;
    let missing = if free == 1 && known > 0 && n.is_multiple_of(known) { n / known } else { 1 };
    let sizes: Vec<usize> = shape.iter().map(|&k| if k == -1 { missing } else { k as usize }).collect();
    (sizes.iter().product::<usize>() == n).then_some(sizes)
}

/// The layout of an access pattern `[[step, count], ...]` starting at cell `base`.
fn pattern_layout(base: isize, pattern: &[[i64; 2]]) -> Layout {
    Layout {
        offset: base,
        shape: pattern.iter().map(|&[_, c]| c as usize).collect(),
        strides: pattern.iter().map(|&[s, _]| s as isize).collect(),
    }
}

/// The refusal of an on-chip access pattern whose partition step is not the
/// allocation's free size.
fn partition_step_message(pattern: &[[i64; 2]], name: &str, free: usize) -> String {
    format!(
        "access pattern {pattern:?} on '{name}': the partition step must be the allocation's free size {free} \
         (SBUF/PSUM partitions are read whole, one after another)"
    )
}

#[cfg(test)]
mod tests {
    use crate::{Dtype, Tensor, s};

    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let d: Vec<f32> = (0..n).map(|i| i as f32).collect();
        Tensor::from_f32(shape, &d, Dtype::F32).unwrap()
    }

    #[test]
    fn hbm_indexing_drops_int_dims_and_steps() {
        let t = iota(&[4, 6]);
        let v = t.index(&s![1..4;2, 3]).unwrap();
        assert_eq!(v.shape(), &[2]);
        assert_eq!(v.to_f32_vec(), vec![9., 21.]);
        assert!(t.index(&s![0..5]).is_err());
        assert_eq!(t.index(&s![-1]).unwrap().to_f32_vec(), vec![18., 19., 20., 21., 22., 23.]);
    }

    #[test]
    fn reshape_and_ap_views() {
        let t = iota(&[2, 3, 4]);
        let r = t.reshape(&[6, 4]).unwrap();
        assert_eq!(r.index(&s![5]).unwrap().to_f32_vec(), vec![20., 21., 22., 23.]);
        // Transposed read of the first [3, 4] block: pattern [[1, 4], [4, 3]].
        let a = t.ap(&[[1, 4], [4, 3]], Some(0), None, 0).unwrap();
        assert_eq!(a.to_f32_vec()[..4], [0., 4., 8., 1.]);
        // A dynamic offset moves by `value` rows of the indirect dim (stride 4 for dim 1).
        let d = t.ap(&[[1, 2]], Some(1), Some(2), 1).unwrap();
        assert_eq!(d.to_f32_vec(), vec![9., 10.]);
        assert!(t.ap(&[[1, 30]], None, None, 0).is_err());
        // On a view, `offset` counts from the view's start (cell 12 for `t[1]`).
        assert_eq!(t.index(&s![1]).unwrap().ap(&[[1, 2]], Some(1), None, 0).unwrap().to_f32_vec(), vec![13., 14.]);
        assert!(t.index(&s![.., 0..2]).unwrap().reshape(&[4, 4]).is_err());
    }

    #[test]
    fn broadcast_only_unit_dims() {
        let t = iota(&[3, 1]);
        let b = t.broadcast(1, 2).unwrap();
        assert_eq!(b.to_f32_vec(), vec![0., 0., 1., 1., 2., 2.]);
        assert!(t.broadcast(0, 2).is_err());
        assert_eq!(t.expand_dim(0).unwrap().shape(), &[1, 3, 1]);
        assert_eq!(iota(&[2, 3]).select(1, 2).unwrap().to_f32_vec(), vec![2., 5.]);
    }
}
