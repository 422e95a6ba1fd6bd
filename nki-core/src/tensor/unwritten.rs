//! Which cells of an allocation nothing has written yet.
//!
//! A tensor from `nl.ndarray` (or `nl.empty_like`) starts with every cell
//! unwritten and filled with zero bits; inputs and the results of `nl`
//! functions are written. Every instruction marks the cells of the views it
//! writes and asks for the unwritten cells of the views it reads
//! ([`crate::emulator::Ctx::record`]): such a read is undefined behaviour on the
//! hardware (the memory holds whatever was there), reported by the launch. Once
//! every cell of an allocation is written its mask is dropped, so a tile pays
//! for the tracking only until it is filled.

use super::psum_writes::unravel;
use super::{Storage, Tensor};
use std::sync::atomic::Ordering;

/// The unwritten cells of one allocation.
pub(crate) struct Unwritten {
    /// Per cell: nothing has written it yet.
    mask: Vec<bool>,
    /// How many cells of `mask` are set.
    left: usize,
}

/// The unwritten cells an instruction read from one allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// How many element reads found an unwritten cell.
    pub count: usize,
    /// The first such cell (in the view's logical order), as an index of the allocation.
    pub first: Vec<usize>,
}

impl Unwritten {
    pub(crate) fn new(cells: usize) -> Unwritten {
        Unwritten { mask: vec![true; cells], left: cells }
    }

    fn mark_run(&mut self, start: isize, n: usize, step: isize) {
        if step == 1
            && start >= 0
            && let Some(run) = self.mask.get_mut(start as usize..start as usize + n)
        {
            self.left -= run.iter().filter(|&&u| u).count();
            run.fill(false);
            return;
        }
        (0..n as isize).for_each(|i| self.mark(start + i * step));
    }

    fn mark(&mut self, cell: isize) {
        if let Some(u) = usize::try_from(cell).ok().and_then(|c| self.mask.get_mut(c))
            && std::mem::take(u)
        {
            self.left -= 1;
        }
    }

    fn is_unwritten(&self, cell: isize) -> bool {
        usize::try_from(cell).ok().and_then(|c| self.mask.get(c)).copied().unwrap_or(false)
    }
}

/// Calls `f` with every cell of `st` that element reads or writes of `view` reach
/// (`view`'s storage is `st` or a byte or indirection view of it), in the view's
/// logical order: `f(start, n, step)` per run of cells.
fn base_runs(view: &Tensor, mut f: impl FnMut(isize, usize, isize)) {
    let vs = view.storage();
    let own = |f: &mut dyn FnMut(isize)| {
        if view.is_indirect() {
            // `vector_offset` rows: out-of-bounds rows (skipped) are -1 and ignored.
            view.cell_indices("", true).unwrap_or_default().into_iter().for_each(f);
        } else {
            view.layout().for_each_run(|start, n, step| (0..n as isize).for_each(|i| f(start + i * step)));
        }
    };
    match (&vs.base, &vs.indirection) {
        (None, _) if !view.is_indirect() => view.layout().for_each_run(f),
        (None, _) => own(&mut |c| f(c, 1, 1)),
        (Some(base), None) => {
            let (a, b) = (base.dtype.size_bytes() as isize, vs.dtype.size_bytes() as isize);
            own(&mut |c| if b <= a { f(c * b / a, 1, 1) } else { f(c * (b / a), (b / a) as usize, 1) });
        }
        (Some(_), Some(map)) => {
            let at = map.cells().unwrap_or_default();
            own(&mut |c| {
                if let Some(&cell) = usize::try_from(c).ok().and_then(|c| at.get(c)) {
                    f(cell as isize, 1, 1);
                }
            });
        }
    }
}

impl Storage {
    /// Starts tracking this fresh allocation's cells, every one unwritten.
    pub(crate) fn start_unwritten(&self) {
        *self.unwritten.lock().unwrap_or_else(|e| e.into_inner()) = Some(Unwritten::new(self.len()));
        self.fresh.store(true, Ordering::Release);
    }

    /// Notes that cell `cell` of this allocation holds a written value (bytes
    /// another placed tile wrote).
    pub(crate) fn mark_cell_written(&self, cell: usize) {
        if !self.fresh.load(Ordering::Acquire) {
            return;
        }
        let mut guard = self.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(u) = guard.as_mut() {
            u.mark(cell as isize);
        }
    }

    /// The storage holding the cells (a byte or indirection view's base).
    fn allocation(&self) -> &Storage {
        self.base.as_deref().map_or(self, Storage::allocation)
    }
}

impl Tensor {
    /// Notes that an instruction wrote every element of this view.
    pub(crate) fn mark_written(&self) {
        let st = self.storage().allocation();
        if !st.fresh.load(Ordering::Acquire) {
            return;
        }
        let mut guard = st.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        let Some(u) = guard.as_mut() else { return };
        base_runs(self, |start, n, step| u.mark_run(start, n, step));
        if u.left == 0 {
            *guard = None;
            st.fresh.store(false, Ordering::Release);
        }
    }

    /// `'name' [shape] dtype in BUFFER` of the allocation holding this view's cells.
    pub(crate) fn allocation_description(&self) -> String {
        let st = self.storage().allocation();
        format!("'{}' {:?} {} in {}", self.name(), st.shape, st.dtype, st.buffer)
    }

    /// The cells an instruction reading every element of this view finds unwritten.
    pub(crate) fn unwritten_read(&self) -> Option<Found> {
        let st = self.storage().allocation();
        if !st.fresh.load(Ordering::Acquire) {
            return None;
        }
        let guard = st.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        let u = guard.as_ref()?;
        let (mut count, mut first) = (0usize, None);
        base_runs(self, |start, n, step| {
            if step == 1
                && start >= 0
                && let Some(run) = u.mask.get(start as usize..start as usize + n)
            {
                if run.contains(&true) {
                    count += run.iter().filter(|&&x| x).count();
                    first = first.or_else(|| run.iter().position(|&x| x).map(|i| start as usize + i));
                }
                return;
            }
            for i in 0..n as isize {
                let c = start + i * step;
                if u.is_unwritten(c) {
                    count += 1;
                    first = first.or(Some(c as usize));
                }
            }
        });
        let first = first?;
        Some(Found { count, first: unravel(&st.shape, first) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Buffer, Dtype};

    fn fresh(shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        let st = Storage::new(("t", false), Dtype::F32, Buffer::Sbuf, shape, vec![0.0; n], None);
        st.start_unwritten();
        Tensor::from_storage(st)
    }

    #[test]
    fn writes_clear_cells_and_reads_find_the_rest_until_the_mask_is_dropped() {
        let t = fresh(&[2, 4]);
        t.with_layout(crate::tensor::Layout { offset: 0, shape: vec![2, 2], strides: vec![4, 1] }).mark_written();
        assert_eq!(t.unwritten_read(), Some(Found { count: 4, first: vec![0, 2] }));
        let right = t.with_layout(crate::tensor::Layout { offset: 2, shape: vec![2, 2], strides: vec![4, 1] });
        assert_eq!(right.unwritten_read(), Some(Found { count: 4, first: vec![0, 2] }));
        right.mark_written();
        assert_eq!(t.unwritten_read(), None);
        assert!(!t.storage().fresh.load(Ordering::Acquire), "a fully written allocation drops its mask");
    }
}
