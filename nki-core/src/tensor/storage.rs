//! The cells behind tensors.

use super::Buffer;
use super::psum_writes::PsumWrites;
use super::tensor_indirection::Indirection;
use super::unwritten::Unwritten;
use crate::Dtype;
use crate::emulator::memory::Lease;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One allocation. Cells hold `f32` values for float dtypes and integer bit
/// patterns for integer dtypes (see [`Dtype::cell_to_f32`]).
///
/// Shared-HBM storages are reached from several threads (LNC programs, ranks), so
/// cells sit behind a lock; ops never hold a lock on a shared storage while taking
/// another one, which keeps multi-program runs free of lock-order deadlocks.
pub(crate) struct Storage {
    pub(crate) id: u64,
    /// The name given at allocation (`name=`, the `let` binding of an
    /// `nl.ndarray`, or a default of the op that made it).
    name: String,
    /// Whether `name` is an explicit `name=`, which later bindings keep.
    explicit: bool,
    /// The kernel variable most recently bound to this storage alone (see
    /// [`Storage::bind`]); it names the storage in messages when set.
    bound: Mutex<Option<&'static str>>,
    pub(crate) dtype: Dtype,
    pub(crate) buffer: Buffer,
    pub(crate) shape: Vec<usize>,
    pub(crate) cells: RwLock<Vec<f32>>,
    /// For a byte view (`.view(dtype)`) or a tensor-indirection view
    /// (`.indirect()`): the storage whose cells it reads and writes; its own
    /// `cells` then stay empty.
    pub(crate) base: Option<Arc<Storage>>,
    /// For a tensor-indirection view (`.indirect()`): where its cells are in `base`.
    pub(crate) indirection: Option<Indirection>,
    /// For PSUM: which instruction last wrote each cell since allocation.
    writes: Mutex<PsumWrites>,
    /// An on-chip allocation's hold on its program's memory (dropped with it).
    lease: Option<Lease>,
    /// For a fresh allocation, the cells nothing has written yet (see
    /// [`super::unwritten`]); `fresh` says whether there are any, so reads and
    /// writes of written allocations skip the lock.
    pub(super) unwritten: Mutex<Option<Unwritten>>,
    pub(super) fresh: AtomicBool,
    /// Bumped by every write of `cells` (under its lock), so that the bytes
    /// decoded as another dtype are reused only while they are unchanged.
    pub(super) generation: AtomicU64,
    /// The cells decoded as another dtype for a byte view (see
    /// [`super::reinterpret`]), at the `generation` they were taken: a large
    /// HBM tensor read tile by tile through a view is decoded once, not per read.
    pub(super) decoded: Mutex<Option<super::reinterpret::Decoded>>,
}

impl Storage {
    /// A new allocation named `name`; an `explicit` name is kept by later bindings.
    pub(crate) fn new(
        (name, explicit): (&str, bool),
        dtype: Dtype,
        buffer: Buffer,
        shape: &[usize],
        cells: Vec<f32>,
        lease: Option<Lease>,
    ) -> Arc<Storage> {
        Arc::new(Storage {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            explicit,
            bound: Mutex::new(None),
            dtype,
            buffer,
            shape: shape.to_vec(),
            writes: Mutex::new(if buffer == Buffer::Psum { PsumWrites::new(cells.len()) } else { PsumWrites::default() }),
            cells: RwLock::new(cells),
            base: None,
            indirection: None,
            lease,
            unwritten: Mutex::new(None),
            fresh: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            decoded: Mutex::new(None),
        })
    }

    /// The bytes of `base` as `dtype` cells in `shape` (same id: the same memory).
    pub(crate) fn alias(base: Arc<Storage>, dtype: Dtype, shape: &[usize]) -> Arc<Storage> {
        Arc::new(Storage {
            id: base.id,
            name: base.name.clone(),
            explicit: base.explicit,
            bound: Mutex::new(None),
            dtype,
            buffer: base.buffer,
            shape: shape.to_vec(),
            writes: Mutex::new(PsumWrites::default()),
            cells: RwLock::new(Vec::new()),
            base: Some(base),
            indirection: None,
            lease: None,
            unwritten: Mutex::new(None),
            fresh: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            decoded: Mutex::new(None),
        })
    }

    /// The cells of `base` that `map` selects, in `shape` (same id: the same memory).
    pub(crate) fn indirection(base: Arc<Storage>, map: Indirection, shape: &[usize]) -> Arc<Storage> {
        let dtype = base.dtype;
        let mut st = Storage::alias(base, dtype, shape);
        if let Some(s) = Arc::get_mut(&mut st) {
            s.indirection = Some(map);
        }
        st
    }

    pub(crate) fn hbm(name: &str, dtype: Dtype, buffer: Buffer, shape: &[usize], cells: Vec<f32>) -> Arc<Storage> {
        Storage::new((name, false), dtype, buffer, shape, cells, None)
    }

    /// The name messages use: the newest binding, else the allocation's name (a
    /// view's, its base's).
    pub(crate) fn name(&self) -> &str {
        if let Some(b) = *self.bound.lock().unwrap_or_else(|e| e.into_inner()) {
            return b;
        }
        match &self.base {
            Some(base) => base.name(),
            None => &self.name,
        }
    }

    /// Names `st` after the kernel variable `var` bound to it, in place: storage,
    /// views and memory accounting are untouched. Only a storage that `var` alone
    /// holds takes the name (a view or a second handle of a tile another variable
    /// holds keeps that variable's name), and an explicit `name=` is kept.
    pub(crate) fn bind(st: &Arc<Storage>, var: &'static str) {
        if st.explicit || Arc::strong_count(st) != 1 {
            return;
        }
        *st.bound.lock().unwrap_or_else(|e| e.into_inner()) = Some(var);
        if let Some(l) = &st.lease {
            l.bind(var);
        }
    }

    /// Renames `st` in place when this is its only handle, else renames a copy.
    pub(crate) fn renamed(mut st: Arc<Storage>, name: &str) -> Arc<Storage> {
        if let Some(s) = Arc::get_mut(&mut st) {
            s.name = name.to_string();
            *s.bound.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
            return st;
        }
        let cells = st.read_cells().clone();
        Storage::hbm(name, st.dtype, st.buffer, &st.shape, cells)
    }

    /// The memory lease of the on-chip allocation this storage is or views.
    pub(crate) fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref().or_else(|| self.base.as_deref().and_then(Storage::lease))
    }

    /// Whether this is a tensor-indirection view (`.indirect()`).
    pub(crate) fn is_indirection(&self) -> bool {
        self.indirection.is_some()
    }

    /// The writers of the PSUM cells (an empty record for other buffers).
    pub(crate) fn psum_writes(&self) -> MutexGuard<'_, PsumWrites> {
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Cells per partition for on-chip storages; all cells for HBM.
    pub(crate) fn partition_cells(&self) -> usize {
        if self.buffer.is_on_chip() { self.shape[1..].iter().product() } else { self.len() }
    }

    /// The fill of a fresh allocation: the cell whose bits are all zero (a finite
    /// value in every dtype). Reads of it are reported ([`super::unwritten`]).
    pub(crate) fn uninit_cell(dtype: Dtype) -> f32 {
        super::cell_of_bytes(dtype, &vec![0; dtype.size_bytes()])
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        let cells = self.cells.get_mut().unwrap_or_else(|e| e.into_inner());
        super::recycle::give_back(std::mem::take(cells));
    }
}
