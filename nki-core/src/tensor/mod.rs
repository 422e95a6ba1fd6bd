//! Tensors and views in HBM, SBUF and PSUM.
//!
//! A [`Tensor`] is a cheap handle: a strided [`Layout`] over a shared storage.
//! Slicing, reshaping, access patterns and broadcasts make new views of the same
//! storage; ops read and write through views.

mod buffer;
mod count;
mod index;
mod indirect;
mod layout;
mod outputs;
mod psum_writes;
mod rearrange;
mod recycle;
mod reinterpret;
mod run_map;
mod storage;
mod tensor_indirection;
mod unwritten;
mod view;
mod write_races;

pub use buffer::Buffer;
pub use count::checked_numel;
pub(crate) use count::reserve_cells;
pub use index::{__with_step, Idx, IndexInt};
use indirect::VectorOffset;
pub use layout::{Layout, row_major_strides};
pub use outputs::Outputs;
pub(crate) use psum_writes::Writer;
pub use rearrange::Pattern;
pub use recycle::POISON_TILES_ENV;
pub(crate) use recycle::{filled, give_back, leftover, take};
pub(crate) use reinterpret::{Cells, bytes_of_cell, cell_of_bytes};
pub(crate) use storage::Storage;
pub(crate) use unwritten::{Found, Reach};
pub(crate) use write_races::WriteRaces;

use crate::{Dtype, ErrorKind, NkiError, Result};
use ndarray::{ArrayD, IxDyn};
use reinterpret::CellsMut;
use std::fmt;
use std::sync::Arc;

/// A view of a tensor in one of the NKI memory spaces.
///
/// ```
/// use nki_core::{Dtype, Tensor, s};
/// let t = Tensor::from_f32(&[2, 3], &[1., 2., 3., 4., 5., 6.], Dtype::F32).unwrap();
/// let col = t.index(&s![.., 1]).unwrap();
/// assert_eq!(col.shape(), &[2]);
/// assert_eq!(col.to_f32_vec(), vec![2., 5.]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    st: Arc<Storage>,
    layout: Layout,
    /// The row offsets of an `.ap(vector_offset=)` view, read when a DMA uses it.
    rows: Option<Arc<VectorOffset>>,
}

impl Tensor {
    pub(crate) fn from_storage(st: Arc<Storage>) -> Tensor {
        let layout = Layout::row_major(&st.shape);
        Tensor { st, layout, rows: None }
    }

    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor { st: Arc::clone(&self.st), layout, rows: None }
    }

    /// A shared-HBM tensor holding `data` (row-major), rounded to `dtype`.
    ///
    /// `shape`'s element count is checked (an overflowing product is an error)
    /// and must equal `data.len()`.
    pub fn from_f32(shape: &[usize], data: &[f32], dtype: Dtype) -> Result<Tensor> {
        Tensor::from_values(shape, data, dtype, |v| dtype.f32_to_cell(v, true))
    }

    /// A shared-HBM tensor holding the integers `data` (row-major) as `dtype`
    /// (integer dtypes saturate at their range; float dtypes round), with the
    /// element count checked as in [`Tensor::from_f32`].
    pub fn from_i64(shape: &[usize], data: &[i64], dtype: Dtype) -> Result<Tensor> {
        if dtype.is_float() {
            Tensor::from_values(shape, data, dtype, |v| dtype.f32_to_cell(v as f32, true))
        } else {
            Tensor::from_values(shape, data, dtype, |v| dtype.i64_to_cell(v))
        }
    }

    /// `data` encoded cell by cell, after checking it fills `shape`.
    fn from_values<T: Copy>(shape: &[usize], data: &[T], dtype: Dtype, cell: impl Fn(T) -> f32) -> Result<Tensor> {
        let n = checked_numel(shape)?;
        if n != data.len() {
            return Err(NkiError::argument("data", format!("{} elements", data.len()), &format!("shape {shape:?} needs {n} elements")));
        }
        let mut cells = reserve_cells(n, "data")?;
        cells.extend(data.iter().map(|&v| cell(v)));
        Tensor::from_cells(shape, dtype, cells)
    }

    /// A shared-HBM tensor over `cells` already encoded for `dtype` (see
    /// [`Dtype::f32_to_cell`]), checking that they fill `shape`.
    pub(crate) fn from_cells(shape: &[usize], dtype: Dtype, cells: Vec<f32>) -> Result<Tensor> {
        let n = checked_numel(shape)?;
        if n != cells.len() {
            return Err(NkiError::argument("data", format!("{} elements", cells.len()), &format!("shape {shape:?} needs {n} elements")));
        }
        Ok(Tensor::from_storage(Storage::hbm("input", dtype, Buffer::SharedHbm, shape, cells)))
    }

    /// A shared-HBM tensor from an ndarray, rounded to `dtype` (an existing
    /// array's shape always fits, so this cannot fail).
    pub fn from_array(a: &ArrayD<f32>, dtype: Dtype) -> Tensor {
        let cells = a.iter().map(|&v| dtype.f32_to_cell(v, true)).collect();
        Tensor::from_storage(Storage::hbm("input", dtype, Buffer::SharedHbm, a.shape(), cells))
    }

    /// A zero-filled shared-HBM tensor; an error when `shape`'s element count
    /// overflows or its cells cannot be allocated.
    pub fn zeros(shape: &[usize], dtype: Dtype) -> Result<Tensor> {
        let n = checked_numel(shape)?;
        let mut cells = reserve_cells(n, "shape")?;
        cells.resize(n, dtype.f32_to_cell(0.0, true));
        Tensor::from_cells(shape, dtype, cells)
    }

    /// Names a freshly created tensor (names appear in error messages).
    ///
    /// A tensor that other handles still share is copied rather than renamed.
    pub fn named(self, name: &str) -> Tensor {
        Tensor { st: Storage::renamed(self.st, name), layout: self.layout, rows: self.rows }
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        &self.layout.shape
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.layout.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// Element type.
    pub fn dtype(&self) -> Dtype {
        self.st.dtype
    }

    /// Memory space.
    pub fn buffer(&self) -> Buffer {
        self.st.buffer
    }

    /// The name messages use: an explicit `name=`, else the kernel variable
    /// bound to the tensor most recently (see [`Tensor::bound`]), else the
    /// name given at allocation.
    pub fn name(&self) -> &str {
        self.st.name()
    }

    /// Names this tensor after the kernel variable `var` it is bound to
    /// (`let x = nl::load(..)`), in place: no cells are copied and views keep
    /// sharing them. Only a tensor no other handle holds takes the name, and an
    /// explicit `name=` is kept.
    pub fn bound(self, var: &'static str) -> Tensor {
        Storage::bind(&self.st, var);
        self
    }

    /// The view's layout over its storage.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether the view's elements occupy consecutive cells in logical order (its
    /// free dims only, for an on-chip tensor).
    pub fn is_contiguous(&self) -> bool {
        let l = &self.layout;
        let skip = usize::from(self.buffer().is_on_chip()).min(l.shape.len());
        Layout { offset: 0, shape: l.shape[skip..].to_vec(), strides: l.strides[skip..].to_vec() }.contiguous_start().is_some()
    }

    /// Whether two views share storage (a `.view()` or `.indirect()` view shares its base's).
    pub fn same_storage(&self, other: &Tensor) -> bool {
        self.st.id == other.st.id
    }

    /// Whether two views read the same cells: the same storage, not a byte or indirect view of it.
    pub(crate) fn same_cells(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.st, &other.st)
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.st
    }

    /// Cells per partition of the underlying on-chip allocation (total cells for HBM).
    pub(crate) fn partition_cells(&self) -> usize {
        self.st.partition_cells()
    }

    pub(crate) fn read(&self) -> Cells<'_> {
        self.st.read_cells()
    }

    pub(crate) fn write(&self) -> CellsMut<'_> {
        self.st.write_cells()
    }

    /// The view's raw cells in logical order (one read lock, released on return),
    /// in a buffer to hand back with [`recycle::give_back`] when done.
    pub(crate) fn gather_cells(&self) -> Vec<f32> {
        let mut out = recycle::take(self.numel());
        self.layout.gather(&self.read(), &mut out);
        out
    }

    /// Calls `f` with this view's cells to write and `src`'s to read, under both
    /// locks taken in storage-id order (so concurrent calls cannot deadlock),
    /// when the two are different allocations (neither a byte or indirection
    /// view); `false`, `f` not called, otherwise.
    pub(crate) fn with_cells_of(&self, src: &Tensor, f: impl FnOnce(&mut [f32], &[f32])) -> bool {
        let plain = |t: &Tensor| t.st.base.is_none() && t.st.indirection.is_none();
        if self.same_storage(src) || !plain(self) || !plain(src) {
            return false;
        }
        if self.st.id < src.st.id {
            let mut to = self.write();
            f(&mut to, &src.read());
        } else {
            let from = src.read();
            f(&mut self.write(), &from);
        }
        true
    }

    /// Copies `src`'s elements into this view (equal element counts, paired in
    /// logical order), converting as [`Tensor::store_cells`] does. Two views of
    /// different storages whose runs are contiguous (rows of tiles) copy
    /// directly, run by run, under both locks ([`Tensor::with_cells_of`]);
    /// anything else goes through a buffer with one lock held at a time.
    pub(crate) fn copy_cells_from(&self, src: &Tensor, round: bool) {
        let (d, s) = (self.dtype(), src.dtype());
        let direct = !self.same_storage(src) && (d == s || (d.is_float() && s.is_float()));
        if direct && let (Some(to_runs), Some(from_runs)) = (self.layout.contiguous_runs(), src.layout.contiguous_runs()) {
            let round = |piece: &mut [f32]| {
                if d != s && round {
                    crate::dtype::round_slice(d, piece);
                }
            };
            let copy = |to: &mut [f32], from: &[f32]| layout::copy_runs(to, &to_runs, from, &from_runs, round);
            if self.with_cells_of(src, copy) {
                self.mark_written();
                return;
            }
        }
        let mut cells = src.gather_cells();
        self.store_cells(s, &mut cells, round);
        recycle::give_back(cells);
    }

    /// Writes raw `cells` of `src_dtype` into the view, converting through fp32
    /// when the dtypes differ (float results rounded when `round`); `cells` is
    /// converted in place.
    pub(crate) fn store_cells(&self, src_dtype: Dtype, cells: &mut [f32], round: bool) {
        convert_cells(src_dtype, self.dtype(), cells, round);
        self.layout.scatter_with(&mut self.write(), cells, |c| c);
        self.mark_written();
    }

    /// The view's values as `f32`, in logical (row-major) order.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.zero_leftovers(Reach::Whole);
        let mut out = Vec::new();
        self.layout.gather(&self.read(), &mut out);
        if !self.dtype().is_float() {
            let d = self.dtype();
            out.iter_mut().for_each(|c| *c = d.cell_to_f32(*c));
        }
        out
    }

    /// Calls `f` with the view's values as `f32` in logical order: the storage's
    /// own cells, under its read lock, when they are float values in consecutive
    /// order; else a copy ([`Tensor::to_f32_vec`]).
    pub(crate) fn with_f32_values<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        if self.dtype().is_float() { self.with_cells(f) } else { f(&self.to_f32_vec()) }
    }

    /// Calls `f` with the view's storage cells in logical order: the storage's
    /// own, under its read lock, when they are consecutive; else a gathered copy.
    pub(crate) fn with_cells<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        if let Some(start) = self.layout.contiguous_start() {
            let cells = self.read();
            if let Some(values) = cells.get(start..start + self.numel()) {
                return f(values);
            }
        }
        let mut out = Vec::new();
        self.layout.gather(&self.read(), &mut out);
        f(&out)
    }

    /// The view's values as exact integers (floats truncate toward zero).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        self.zero_leftovers(Reach::Whole);
        let mut out = Vec::new();
        self.layout.gather(&self.read(), &mut out);
        let d = self.dtype();
        out.iter().map(|&c| d.cell_to_i64(c)).collect()
    }

    /// The view's values as an ndarray of its shape.
    pub fn to_array(&self) -> ArrayD<f32> {
        ArrayD::from_shape_vec(IxDyn(self.shape()), self.to_f32_vec()).expect("numel matches shape")
    }

    /// Overwrites the view with `data` (logical order), rounding to the dtype.
    pub fn fill_from_f32(&self, data: &[f32]) -> Result<()> {
        if data.len() != self.numel() {
            return Err(NkiError::argument(
                "data",
                format!("{} elements", data.len()),
                &format!("view {:?} holds {} elements", self.shape(), self.numel()),
            ));
        }
        let d = self.dtype();
        self.layout.scatter_with(&mut self.write(), data, |v| d.f32_to_cell(v, true));
        self.mark_written();
        Ok(())
    }

    /// Writes `value` into every element, rounded to the dtype when `round` is set
    /// (integer dtypes always round and saturate).
    pub(crate) fn fill_value(&self, value: f32, round: bool) {
        let d = self.dtype();
        let cell = d.f32_to_cell(value, round);
        self.layout.scatter_with(&mut self.write(), &vec![cell; self.numel()], |c| c);
        self.mark_written();
    }

    /// Checks the view stays inside its storage.
    pub(crate) fn check_bounds(&self, what: &str) -> Result<()> {
        if let Some(map) = &self.st.indirection {
            map.check(what, self)?;
        }
        if let Some((lo, hi)) = self.layout.cell_range() {
            let len = self.st.len() as isize;
            if lo < 0 || hi >= len {
                return Err(NkiError::new(
                    ErrorKind::Bounds,
                    format!(
                        "{what} of '{}' reaches cells {lo}..={hi}, outside the tensor's {len} cells \
                         (allocation shape {:?})",
                        self.name(),
                        self.st.shape
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A short description for messages: `'name' [128, 512] bfloat16 in SBUF`.
    pub fn describe(&self) -> String {
        format!("'{}' {:?} {} in {}", self.name(), self.shape(), self.dtype(), self.buffer())
    }
}

/// Converts raw `cells` of dtype `from` in place into cells of `to`, through fp32
/// (float results rounded when `round`).
fn convert_cells(from: Dtype, to: Dtype, cells: &mut [f32], round: bool) {
    if to == from {
        return;
    }
    if to.is_float() && from.is_float() {
        if round {
            crate::dtype::round_slice(to, cells);
        }
    } else {
        cells.iter_mut().for_each(|c| *c = to.f32_to_cell(from.cell_to_f32(*c), round));
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({})", self.describe())
    }
}
