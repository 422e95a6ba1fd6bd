//! Which cells of an allocation nothing has written yet.
//!
//! A tensor from `nl.ndarray` (or `nl.empty_like`) starts with every cell
//! unwritten and filled with zero bits; inputs and the results of `nl`
//! functions are written. Every instruction marks the cells of the views it
//! writes and asks for the unwritten cells of the views it reads
//! ([`crate::emulator::Ctx::record`]): such a read is undefined behaviour on the
//! hardware (the memory holds whatever was there), reported by the launch. The
//! mask (a bit per cell) is built only when a first write leaves part of the
//! allocation unwritten, and dropped once every cell is written: a tile filled by
//! one instruction never has one, and a written allocation costs one atomic load
//! per operand.
//!
//! A large on-chip tile may instead start in a buffer an earlier allocation
//! left behind ([`Storage::start_unwritten`]): filling every cell
//! with zero bits cost as much as an attention kernel's exponentials, and most
//! tiles are overwritten whole by their first instruction. Its unwritten cells
//! hold leftovers until something could see them, and are zeroed then: the
//! cells an instruction reads ([`crate::emulator::Ctx::record`] and the checks
//! of partial reads), the cells of a destination whose instruction does not
//! overwrite every one of them ([`crate::isa::OVERWRITES`]), and the values a
//! caller takes out ([`Tensor::to_f32_vec`]). Every observable value is the one
//! a zero-filled tile gives.

use super::psum_writes::unravel;
use super::{Storage, Tensor};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// The unwritten cells of one allocation.
pub(crate) struct Unwritten {
    /// One bit per cell, set while nothing has written it; `None` while every
    /// cell is unwritten, so a first write of the whole allocation (the usual
    /// way a tile is filled) never builds a mask.
    mask: Option<Vec<u64>>,
    /// How many cells the allocation has.
    cells: usize,
    /// How many cells are unwritten.
    left: usize,
    /// The zero bits of the allocation's dtype, when its unwritten cells hold
    /// leftovers of an earlier allocation rather than them.
    leftovers: Option<f32>,
}

/// The unwritten cells an instruction read from one allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// How many element reads found an unwritten cell.
    pub count: usize,
    /// The first such cell (in the view's logical order), as an index of the allocation.
    pub first: Vec<usize>,
}

/// The first of the cells `start..start + n`, when they all lie in an
/// allocation of `len` cells.
pub(super) fn cells_within(start: isize, n: usize, len: usize) -> Option<usize> {
    let s = usize::try_from(start).ok()?;
    (s.checked_add(n)? <= len).then_some(s)
}

/// A word of a bit mask and the bits of it a run covers.
type PartWord = Option<(usize, u64)>;

/// The words of a bit mask holding bits `start..start + n`: a partly covered
/// first word and its covered bits, the wholly covered words, a partly covered
/// last word and its bits. A run within one word is a first word alone.
fn word_span(start: usize, n: usize) -> (PartWord, Range<usize>, PartWord) {
    let end = start + n;
    let (first, last) = (start / 64, end / 64);
    if n == 0 {
        return (None, first..first, None);
    }
    if first == last {
        return (Some((first, ((1u64 << n) - 1) << (start % 64))), first..first, None);
    }
    let head = (!start.is_multiple_of(64)).then(|| (first, !0u64 << (start % 64)));
    let tail = (!end.is_multiple_of(64)).then(|| (last, (1u64 << (end % 64)) - 1));
    (head, start.div_ceil(64)..last, tail)
}

/// Calls `f(word, bits)` for the words of a bit mask holding bits `start..start + n`, in order.
fn words(start: usize, n: usize, mut f: impl FnMut(usize, u64)) {
    let (head, whole, tail) = word_span(start, n);
    head.into_iter().chain(whole.map(|w| (w, !0))).chain(tail).for_each(|(w, m)| f(w, m));
}

/// The set bits of `bits`, which `m` holds: counted only when some but not
/// all of `m`'s are set (the crate's baseline has no popcount instruction,
/// and a run is usually wholly unwritten or wholly written).
#[inline]
fn set_bits(bits: u64, m: u64) -> usize {
    if bits == 0 {
        0
    } else if bits == m {
        (64 - m.leading_zeros() - m.trailing_zeros()) as usize
    } else {
        bits.count_ones() as usize
    }
}

impl Unwritten {
    pub(crate) fn new(cells: usize) -> Unwritten {
        Unwritten { mask: None, cells, left: cells, leftovers: None }
    }

    /// Whether cell `c` is unwritten (it is in the allocation).
    pub(super) fn is_unwritten(&self, c: usize) -> bool {
        self.mask.as_ref().is_none_or(|m| m.get(c / 64).is_some_and(|w| w >> (c % 64) & 1 == 1))
    }

    /// Sets the unwritten cells among `start + i * step` for `i` in `0..n` (those
    /// in the allocation) of `values` to `zero`.
    fn zero_run(&self, values: &mut [f32], zero: f32, start: isize, n: usize, step: isize) {
        match self.in_bounds(start, n) {
            Some(s) if step == 1 || n == 1 => match &self.mask {
                None => values[s..s + n].fill(zero),
                Some(mask) => words(s, n, |w, m| {
                    let mut set = mask[w] & m;
                    while set != 0 {
                        values[w * 64 + set.trailing_zeros() as usize] = zero;
                        set &= set - 1;
                    }
                }),
            },
            _ => (0..n as isize).filter_map(|i| usize::try_from(start + i * step).ok()).for_each(|c| {
                if c < self.cells && self.is_unwritten(c) {
                    values[c] = zero;
                }
            }),
        }
    }

    /// The cells `start..start + n`, when they are all in the allocation.
    fn in_bounds(&self, start: isize, n: usize) -> Option<usize> {
        cells_within(start, n, self.cells)
    }

    /// The mask, built (every cell unwritten) on the first write of part of the allocation.
    fn mask_mut(&mut self) -> &mut Vec<u64> {
        let cells = self.cells;
        self.mask.get_or_insert_with(|| {
            let mut m = vec![!0u64; cells.div_ceil(64)];
            if let Some(last) = m.last_mut().filter(|_| !cells.is_multiple_of(64)) {
                *last = (1u64 << (cells % 64)) - 1;
            }
            m
        })
    }

    /// Marks the cells `start + i * step` for `i` in `0..n` written (those in the allocation).
    fn mark_run(&mut self, start: isize, n: usize, step: isize) {
        match self.in_bounds(start, n) {
            Some(s) if step == 1 || n == 1 => {
                if self.mask.is_none() && s == 0 && n == self.cells {
                    self.left = 0;
                    return;
                }
                let mask = self.mask_mut();
                let (head, whole, tail) = word_span(s, n);
                let mut cleared = 0;
                for (w, m) in head.into_iter().chain(tail) {
                    cleared += set_bits(mask[w] & m, m);
                    mask[w] &= !m;
                }
                // Whole words in a loop of their own: rows of a tile are marked row by row.
                for w in &mut mask[whole] {
                    cleared += set_bits(*w, !0);
                    *w = 0;
                }
                self.left -= cleared;
            }
            // A strided run (a column) inside the allocation clears its bits
            // directly: a reduce column marked cell by cell was a hot spot.
            _ if n > 1
                && self.in_bounds(start.min(start + (n as isize - 1) * step), 1).is_some()
                && self.in_bounds(start.max(start + (n as isize - 1) * step), 1).is_some() =>
            {
                let mask = self.mask_mut();
                let mut cleared = 0;
                for i in 0..n as isize {
                    let c = (start + i * step) as usize;
                    let bit = 1u64 << (c % 64);
                    cleared += usize::from(mask[c / 64] & bit != 0);
                    mask[c / 64] &= !bit;
                }
                self.left -= cleared;
            }
            _ if n > 1 => (0..n as isize).for_each(|i| self.mark_run(start + i * step, 1, 1)),
            _ => {}
        }
    }

    /// How many of the cells `start..start + n` are unwritten, and the first of them.
    pub(super) fn count_run(&self, start: usize, n: usize) -> (usize, Option<usize>) {
        let Some(mask) = &self.mask else { return (n, (n > 0).then_some(start)) };
        let (mut count, mut first) = (0, None);
        let mut see = |w: usize, set: u64, m: u64| {
            if set != 0 {
                count += set_bits(set, m);
                first = first.or(Some(w * 64 + set.trailing_zeros() as usize));
            }
        };
        let (head, whole, tail) = word_span(start, n);
        if let Some((w, m)) = head {
            see(w, mask[w] & m, m);
        }
        // Whole words in a loop of their own: a written row is a run of zero words.
        for w in whole {
            see(w, mask[w], !0);
        }
        if let Some((w, m)) = tail {
            see(w, mask[w] & m, m);
        }
        (count, first)
    }
}

/// Which cells of a view an instruction reads or writes.
#[derive(Clone, Copy)]
pub(crate) enum Reach<'a> {
    /// Every element of the view.
    Whole,
    /// Only these cells of the view's storage, in the view's logical order; a
    /// negative one (a row an `oob_mode=skip` DMA left out) is not reached.
    Cells(&'a [isize]),
}

/// Calls `f` with every cell of `st` that element reads or writes of `view`
/// reach (`view`'s storage is `st` or a byte or indirection view of it), in the
/// view's logical order: `f(start, n, step)` per run of cells.
pub(super) fn base_runs(view: &Tensor, reach: Reach<'_>, mut f: impl FnMut(isize, usize, isize)) {
    let vs = view.storage();
    let own = |f: &mut dyn FnMut(isize)| match reach {
        Reach::Cells(cells) => cells.iter().filter(|&&c| c >= 0).for_each(|&c| f(c)),
        // `vector_offset` rows: out-of-bounds rows (skipped) are -1 and ignored.
        Reach::Whole if view.is_indirect() => view.cell_indices("", true).unwrap_or_default().into_iter().filter(|&c| c >= 0).for_each(f),
        Reach::Whole => view.layout().for_each_run(|start, n, step| (0..n as isize).for_each(|i| f(start + i * step))),
    };
    match (&vs.base, &vs.indirection) {
        (None, _) if matches!(reach, Reach::Whole) && !view.is_indirect() => view.layout().for_each_run(f),
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
    /// Starts tracking this fresh allocation's cells, every one unwritten. With
    /// `leftovers`, its cells hold what an earlier allocation left
    /// ([`super::recycle::leftover`]) rather than zero bits: the unwritten ones
    /// read as zero bits all the same (see the module docs).
    pub(crate) fn start_unwritten(&self, leftovers: bool) {
        let mut u = Unwritten::new(self.len());
        u.leftovers = leftovers.then(|| Storage::uninit_cell(self.dtype));
        *self.unwritten.lock().unwrap_or_else(|e| e.into_inner()) = Some(u);
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
            u.mark_run(cell as isize, 1, 1);
        }
    }

    /// Calls `f` with this allocation's record of unwritten cells (`None` when
    /// every one is written), under its lock: a large tile filled tile by tile
    /// is asked at every write.
    pub(super) fn with_unwritten<R>(&self, f: impl FnOnce(Option<&Unwritten>) -> R) -> R {
        if !self.fresh.load(Ordering::Acquire) {
            return f(None);
        }
        let guard = self.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        f(guard.as_ref())
    }

    /// The storage holding the cells (a byte or indirection view's base).
    pub(super) fn allocation(&self) -> &Storage {
        self.base.as_deref().map_or(self, Storage::allocation)
    }
}

impl Tensor {
    /// Notes that an instruction wrote every element of this view.
    pub(crate) fn mark_written(&self) {
        self.mark_reach_written(Reach::Whole);
    }

    /// Notes that an instruction wrote the cells of this view `reach` names.
    pub(crate) fn mark_reach_written(&self, reach: Reach<'_>) {
        let st = self.storage().allocation();
        if !st.fresh.load(Ordering::Acquire) {
            return;
        }
        let mut guard = st.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        let Some(u) = guard.as_mut() else { return };
        base_runs(self, reach, |start, n, step| u.mark_run(start, n, step));
        if u.left == 0 {
            *guard = None;
            st.fresh.store(false, Ordering::Release);
        }
    }

    /// Sets the unwritten cells of this view `reach` names that hold leftovers
    /// (see the module docs) to zero bits, as a fresh allocation holds them.
    pub(crate) fn zero_leftovers(&self, reach: Reach<'_>) {
        let st = self.storage().allocation();
        if !st.fresh.load(Ordering::Acquire) {
            return;
        }
        let guard = st.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        let Some((u, zero)) = guard.as_ref().and_then(|u| Some((u, u.leftovers?))) else { return };
        // Only an on-chip tile holds leftovers, and no one else takes its cells'
        // lock while holding this record's (write races lock shared HBM only).
        let mut cells = st.cells.write().unwrap_or_else(|e| e.into_inner());
        base_runs(self, reach, |start, n, step| u.zero_run(&mut cells, zero, start, n, step));
    }

    /// Whether the allocation holding this view's cells may have unwritten cells
    /// (one never fully written stays so until an instruction writes the rest).
    pub(crate) fn may_be_unwritten(&self) -> bool {
        self.storage().allocation().fresh.load(Ordering::Acquire)
    }

    /// `'name' [shape] dtype in BUFFER` of the allocation holding this view's cells.
    pub(crate) fn allocation_description(&self) -> String {
        let st = self.storage().allocation();
        format!("'{}' {:?} {} in {}", self.name(), st.shape, st.dtype, st.buffer)
    }

    /// The cells an instruction reading the cells of this view `reach` names finds unwritten.
    pub(crate) fn unwritten_read(&self, reach: Reach<'_>) -> Option<Found> {
        let st = self.storage().allocation();
        if !st.fresh.load(Ordering::Acquire) {
            return None;
        }
        let guard = st.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        let u = guard.as_ref()?;
        let (mut count, mut first) = (0usize, None);
        base_runs(self, reach, |start, n, step| {
            // A contiguous run is counted a word at a time, any other cell by cell.
            let whole = step == 1 && u.in_bounds(start, n).is_some();
            let (runs, len, step) = if whole { (1, n, 0) } else { (n, 1, step) };
            for i in 0..runs as isize {
                let Some(s) = u.in_bounds(start + i * step, len) else { continue };
                let (c, f) = u.count_run(s, len);
                count += c;
                first = first.or(f);
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
        st.start_unwritten(false);
        Tensor::from_storage(st)
    }

    #[test]
    fn writes_clear_cells_and_reads_find_the_rest_until_the_mask_is_dropped() {
        let t = fresh(&[2, 4]);
        t.with_layout(crate::tensor::Layout { offset: 0, shape: vec![2, 2], strides: vec![4, 1] }).mark_written();
        assert_eq!(t.unwritten_read(Reach::Whole), Some(Found { count: 4, first: vec![0, 2] }));
        let right = t.with_layout(crate::tensor::Layout { offset: 2, shape: vec![2, 2], strides: vec![4, 1] });
        assert_eq!(right.unwritten_read(Reach::Whole), Some(Found { count: 4, first: vec![0, 2] }));
        right.mark_written();
        assert_eq!(t.unwritten_read(Reach::Whole), None);
        assert!(!t.storage().fresh.load(Ordering::Acquire), "a fully written allocation drops its mask");
    }

    /// The words of a run hold exactly its bits, each once, in order.
    #[test]
    fn word_spans_cover_a_run_bit_for_bit() {
        for start in 0..200 {
            for n in 0..200 {
                let mut bits = Vec::new();
                words(start, n, |w, m| bits.extend((0..64).filter(|b| m >> b & 1 == 1).map(|b| w * 64 + b)));
                assert_eq!(bits, (start..start + n).collect::<Vec<_>>(), "start {start}, n {n}");
            }
        }
    }

    #[test]
    fn runs_across_mask_words_and_strided_cells_are_counted_and_cleared() {
        use crate::tensor::Layout;
        let t = fresh(&[3, 50]);
        assert_eq!(t.unwritten_read(Reach::Whole), Some(Found { count: 150, first: vec![0, 0] }));
        t.with_layout(Layout { offset: 10, shape: vec![3, 40], strides: vec![50, 1] }).mark_written();
        assert_eq!(t.unwritten_read(Reach::Whole), Some(Found { count: 30, first: vec![0, 0] }));
        let column = t.with_layout(Layout { offset: 5, shape: vec![3], strides: vec![50] });
        assert_eq!(column.unwritten_read(Reach::Whole), Some(Found { count: 3, first: vec![0, 5] }));
        column.mark_written();
        assert_eq!(column.unwritten_read(Reach::Whole), None);
        let tail = t.with_layout(Layout { offset: 100, shape: vec![50], strides: vec![1] });
        assert_eq!(tail.unwritten_read(Reach::Whole), Some(Found { count: 9, first: vec![2, 0] }));
        t.with_layout(Layout { offset: 0, shape: vec![3, 10], strides: vec![50, 1] }).mark_written();
        assert!(!t.storage().fresh.load(Ordering::Acquire), "a fully written allocation drops its mask");

        let whole = fresh(&[2, 100]);
        whole.mark_written();
        assert_eq!(whole.unwritten_read(Reach::Whole), None);
        assert!(!whole.storage().fresh.load(Ordering::Acquire), "one write of every cell leaves nothing to track");
    }

    /// A storage of `shape` over `leftover` cells, every one unwritten.
    fn over_leftovers(shape: &[usize], leftover: f32) -> Tensor {
        let n = shape.iter().product();
        let st = Storage::new(("t", false), Dtype::F32, Buffer::Sbuf, shape, vec![leftover; n], None);
        st.start_unwritten(true);
        Tensor::from_storage(st)
    }

    fn cells(t: &Tensor) -> Vec<f32> {
        t.storage().cells.read().unwrap().clone()
    }

    #[test]
    fn zeroing_leftovers_touches_the_unwritten_cells_of_the_view_only() {
        use crate::tensor::Layout;
        let t = over_leftovers(&[3, 50], 7.0);
        let block = t.with_layout(Layout { offset: 10, shape: vec![3, 40], strides: vec![50, 1] });
        block.mark_written();
        block.layout().clone().scatter_with(&mut t.storage().cells.write().unwrap(), &[1.0; 120], |c| c);
        // A column crossing written and unwritten rows: only its unwritten cell of each row.
        let column = t.with_layout(Layout { offset: 5, shape: vec![3], strides: vec![50] });
        column.zero_leftovers(Reach::Whole);
        let c = cells(&t);
        assert_eq!((c[5], c[55], c[105], c[4], c[15]), (0.0, 0.0, 0.0, 7.0, 1.0));
        // A run over written cells and across mask words keeps the written ones.
        t.with_layout(Layout { offset: 48, shape: vec![20], strides: vec![1] }).zero_leftovers(Reach::Whole);
        let c = cells(&t);
        assert_eq!(&c[48..68], &[[1.0; 2].as_slice(), &[0.0; 10], &[1.0; 8]].concat()[..]);
        t.zero_leftovers(Reach::Whole);
        let want: Vec<f32> = (0..150).map(|i| if (10..50).contains(&(i % 50)) { 1.0 } else { 0.0 }).collect();
        assert_eq!(cells(&t), want);

        // Nothing written yet: the whole view at once.
        let fresh = over_leftovers(&[2, 100], -3.0);
        fresh.with_layout(Layout { offset: 100, shape: vec![100], strides: vec![1] }).zero_leftovers(Reach::Whole);
        assert_eq!(cells(&fresh), [vec![-3.0; 100], vec![0.0; 100]].concat());
        // A zero-filled allocation has no leftovers to zero.
        let plain = super::tests::fresh(&[2, 4]);
        plain.storage().cells.write().unwrap()[0] = 9.0;
        plain.zero_leftovers(Reach::Whole);
        assert_eq!(cells(&plain)[0], 9.0);
    }

    /// Instructions on tiles that start in buffers holding 7.0 in every cell.
    mod through_instructions {
        use crate::emulator::{Ctx, Launch};
        use crate::isa::{self, Operand};
        use crate::language::{NdarrayOpts, ndarray};
        use crate::{Buffer, Dtype, Tensor};

        /// A `[rows, cols]` tile of `buffer` over a spare buffer of 7.0s (another
        /// test thread may take the spare first: then again).
        fn over_junk(ctx: &Ctx, rows: usize, cols: usize, buffer: Buffer) -> Tensor {
            for _ in 0..100 {
                let junk = vec![7.0f32; rows * cols];
                let at = junk.as_ptr();
                crate::tensor::give_back(junk);
                let opts = NdarrayOpts { buffer: Some(buffer), ..Default::default() };
                let t = ndarray(ctx, &[rows as i64, cols as i64], Dtype::F32, opts).unwrap();
                if t.storage().cells.read().unwrap().as_ptr() == at {
                    return t;
                }
            }
            panic!("no allocation took the spare buffer");
        }

        fn hbm(rows: usize, cols: usize, f: impl Fn(usize) -> f32) -> Tensor {
            Tensor::from_f32(&[rows, cols], &(0..rows * cols).map(f).collect::<Vec<_>>(), Dtype::F32).unwrap()
        }

        #[test]
        fn reads_and_kept_cells_of_leftover_tiles_are_zero_and_overwrites_are_exact() {
            let (p, f, w) = (128usize, 200usize, 256usize);
            let x = hbm(p, f, |i| i as f32 * 0.5 - 3.0);
            let report = Launch::new()
                .strict_uninit(false)
                .run_all(|ctx| {
                    // Columns f.. of `wide` are never written: the instruction reads zero there.
                    let wide = over_junk(ctx, p, w, Buffer::Sbuf);
                    isa::dma_copy(ctx, &wide.slice(1, 0, f as i64, 1)?, &x, Default::default())?;
                    let doubled = over_junk(ctx, p, w, Buffer::Sbuf);
                    isa::tensor_scalar(ctx, &doubled, &wide, crate::language::NlOp::Multiply, Operand::Scalar(2.0), Default::default())?;
                    // A predicated copy keeps the cells its predicate is off for: zero bits.
                    let kept = over_junk(ctx, p, w, Buffer::Sbuf);
                    let even = Tensor::from_f32(&[p, w], &(0..p * w).map(|i| ((i + 1) % 2) as f32).collect::<Vec<_>>(), Dtype::U8)?;
                    let pred = ndarray(ctx, &[p as i64, w as i64], Dtype::U8, NdarrayOpts::default())?;
                    isa::dma_copy(ctx, &pred, &even, Default::default())?;
                    isa::tensor_copy_predicated(ctx, &kept, Operand::Scalar(5.0), &pred, Default::default())?;
                    // A matmul into a leftover PSUM tile overwrites it (accumulate=None).
                    let ones = ndarray(ctx, &[p as i64, p as i64], Dtype::F32, NdarrayOpts::default())?;
                    isa::memset(ctx, &ones, 1.0, Default::default())?;
                    let psum = over_junk(ctx, p, 512, Buffer::Psum);
                    isa::nc_matmul(ctx, &psum.slice(1, 0, w as i64, 1)?, &ones, &doubled, Default::default())?;
                    // The host reads a partly written tile: zero where nothing wrote.
                    let half = over_junk(ctx, p, w, Buffer::Sbuf);
                    isa::memset(ctx, &half.slice(1, 0, 1, 1)?, 4.0, Default::default())?;
                    Ok([doubled, kept, psum, half].map(|t| t.to_f32_vec()))
                })
                .unwrap();
            let [doubled, kept, psum, half] = &report.results[0][0];
            let xv = x.to_f32_vec();
            let want: Vec<f32> = (0..p * w).map(|i| if i % w < f { 2.0 * xv[(i / w) * f + i % w] } else { 0.0 }).collect();
            assert_eq!(doubled, &want);
            assert_eq!(kept, &(0..p * w).map(|i| if i % 2 == 0 { 5.0 } else { 0.0 }).collect::<Vec<_>>());
            let column_sums: Vec<f32> = (0..w).map(|c| (0..p).map(|r| want[r * w + c]).sum()).collect();
            for r in 0..p {
                assert_eq!(&psum[r * 512..r * 512 + w], &column_sums[..], "row {r}");
                assert_eq!(&psum[r * 512 + w..(r + 1) * 512], &[0.0; 256][..], "row {r}: nothing wrote these");
            }
            assert_eq!(half, &(0..p * w).map(|i| if i % w == 0 { 4.0 } else { 0.0 }).collect::<Vec<_>>());
            assert_eq!(report.undefined.len(), 1, "{:?}", report.undefined);
            assert!(report.undefined[0].contains("reads 7168 elements of 'tensor' [128, 256] float32 in SBUF"), "{:?}", report.undefined);
        }

        #[test]
        fn a_double_row_matmul_reads_and_writes_as_tracked_operands() {
            let report = Launch::new()
                .strict_uninit(false)
                .run_all(|ctx| {
                    let opts = |buffer| NdarrayOpts { buffer: Some(buffer), ..Default::default() };
                    let st = ndarray(ctx, &[128, 2, 4], Dtype::Fp8E4m3, opts(Buffer::Sbuf))?;
                    let mv = ndarray(ctx, &[128, 2, 8], Dtype::Fp8E4m3, opts(Buffer::Sbuf))?;
                    isa::memset(ctx, &st, 1.0, Default::default())?;
                    // Half of the moving operand is never written: a read the launch reports.
                    isa::memset(ctx, &mv.slice(0, 0, 64, 1)?, 1.0, Default::default())?;
                    let psum = ndarray(ctx, &[4, 8], Dtype::F32, opts(Buffer::Psum))?;
                    let double_row = isa::NcMatmulOpts { perf_mode: Some(isa::MatmulPerfMode::DoubleRow), ..Default::default() };
                    isa::nc_matmul(ctx, &psum, &st, &mv, double_row)?;
                    let out = ndarray(ctx, &[4, 8], Dtype::F32, opts(Buffer::Sbuf))?;
                    isa::tensor_copy(ctx, &out, &psum, Default::default())?;
                    Ok(out.to_f32_vec())
                })
                .unwrap();
            assert_eq!(report.results[0][0], vec![128.0; 32], "64 partitions x 2 rows of ones, the rest zero bits");
            assert_eq!(report.undefined.len(), 1, "the matmul's product is written: {:?}", report.undefined);
            assert!(report.undefined[0].contains("nisa.nc_matmul reads 1024 elements of 'tensor' [128, 2, 8]"), "{:?}", report.undefined);
        }
    }
}
