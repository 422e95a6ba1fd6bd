//! Which instruction last wrote each PSUM cell.
//!
//! `nc_matmul` reads this record twice: `accumulate=None` overwrites the cells no
//! write has touched since the tensor was allocated and adds onto the others, and
//! whether a matmul may add onto a cell depends on what wrote it (nothing, a
//! matmul, or another instruction such as `memset` or `tensor_copy`).

use super::Layout;

/// The instruction behind a write to PSUM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A Tensor Engine matmul: `nc_matmul`, or an `nc_transpose` on the Tensor
    /// Engine (a matmul against the identity).
    Matmul,
    /// Any other instruction, by its NKI name (`nisa.memset`, `nisa.tensor_copy`, ...).
    Other(&'static str),
}

/// Per-cell writers of one PSUM allocation (empty for other memory spaces).
///
/// While every cell has the same writer the record is that one code: a kernel
/// usually writes a whole PSUM tile with each matmul, and a byte per cell
/// rewritten at every one (64 KiB for a 128 × 512 tile) cost as much as the
/// emulator's transposes.
#[derive(Default)]
pub(crate) struct PsumWrites {
    /// Per cell: [`UNWRITTEN`], [`MATMUL`], or `FIRST_OTHER + i` for `others[i]`;
    /// empty while every cell holds `uniform`.
    codes: Vec<u8>,
    /// The code of every cell while `codes` is empty.
    uniform: u8,
    /// How many cells the allocation has.
    cells: usize,
    /// The non-matmul writers seen so far, in order of their first write. Their
    /// number is bounded by the instructions that can write PSUM, far below 254.
    others: Vec<&'static str>,
}

const UNWRITTEN: u8 = 0;
const MATMUL: u8 = 1;
const FIRST_OTHER: u8 = 2;

/// How the cells of a view were last written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Census {
    /// Some cell has not been written since allocation.
    pub any_unwritten: bool,
    /// No cell has been written since allocation.
    pub all_unwritten: bool,
    /// Some cell was last written by an instruction other than a matmul.
    pub any_other: bool,
}

/// Cells of a view that matched a search.
#[derive(Debug)]
pub(crate) struct Found {
    /// How many matched.
    pub count: usize,
    /// The index in the view of the first match (row-major order).
    pub first: Vec<usize>,
    /// The distinct non-matmul writers of the matching cells.
    pub others: Vec<&'static str>,
}

impl PsumWrites {
    /// `cells` cells, none written.
    pub(crate) fn new(cells: usize) -> PsumWrites {
        PsumWrites { codes: Vec::new(), uniform: UNWRITTEN, cells, others: Vec::new() }
    }

    /// The code of cell `c`.
    fn at(&self, c: isize) -> u8 {
        if self.codes.is_empty() { self.uniform } else { self.codes[c as usize] }
    }

    fn code(&mut self, by: Writer) -> u8 {
        match by {
            Writer::Matmul => MATMUL,
            Writer::Other(name) => {
                let i = self.others.iter().position(|&o| o == name).unwrap_or_else(|| {
                    self.others.push(name);
                    self.others.len() - 1
                });
                FIRST_OTHER.saturating_add(u8::try_from(i).unwrap_or(u8::MAX))
            }
        }
    }

    fn writer(&self, code: u8) -> Option<Writer> {
        match code {
            UNWRITTEN => None,
            MATMUL => Some(Writer::Matmul),
            c => self.others.get(usize::from(c - FIRST_OTHER)).map(|&name| Writer::Other(name)),
        }
    }

    /// Records that `by` wrote every cell of `l`.
    pub(crate) fn mark(&mut self, l: &Layout, by: Writer) {
        let code = self.code(by);
        if self.codes.is_empty() {
            if code == self.uniform {
                return;
            }
            if l.contiguous_start() == Some(0) && l.numel() == self.cells {
                self.uniform = code;
                return;
            }
            self.codes = vec![self.uniform; self.cells];
        }
        let codes = &mut self.codes;
        l.for_each_run(|start, n, step| {
            if step == 1 {
                codes[start as usize..start as usize + n].fill(code);
            } else {
                for i in 0..n as isize {
                    codes[(start + i * step) as usize] = code;
                }
            }
        });
    }

    /// Whether the cells of `l` include unwritten and non-matmul-written ones.
    ///
    /// Every matmul asks this of its destination, so it only takes the lowest and
    /// highest code over the view: byte-wide min/max reductions vectorise fully.
    pub(crate) fn census(&self, l: &Layout) -> Census {
        let (mut lo, mut hi) = (u8::MAX, UNWRITTEN);
        if self.codes.is_empty() {
            if l.numel() > 0 {
                (lo, hi) = (self.uniform, self.uniform);
            }
        } else {
            l.for_each_run(|start, n, step| {
                let (a, b) = if step == 1 {
                    self.codes[start as usize..start as usize + n].iter().fold((u8::MAX, UNWRITTEN), |(a, b), &c| (a.min(c), b.max(c)))
                } else {
                    (0..n as isize)
                        .map(|i| self.codes[(start + i * step) as usize])
                        .fold((u8::MAX, UNWRITTEN), |(a, b), c| (a.min(c), b.max(c)))
                };
                (lo, hi) = (lo.min(a), hi.max(b));
            });
        }
        Census { any_unwritten: lo == UNWRITTEN, all_unwritten: hi == UNWRITTEN, any_other: hi >= FIRST_OTHER }
    }

    /// Whether each element of `l` (row-major in the view) has been written.
    pub(crate) fn written(&self, l: &Layout) -> Vec<bool> {
        let mut out = Vec::with_capacity(l.numel());
        l.for_each_run(|start, n, step| out.extend((0..n as isize).map(|i| self.at(start + i * step) != UNWRITTEN)));
        out
    }

    /// The elements of `l` whose last writer satisfies `hit` (`None`: unwritten).
    pub(crate) fn find(&self, l: &Layout, hit: impl Fn(Option<Writer>) -> bool) -> Option<Found> {
        let mut found: Option<Found> = None;
        let mut pos = 0usize;
        l.for_each_run(|start, n, step| {
            for i in 0..n as isize {
                let w = self.writer(self.at(start + i * step));
                if hit(w) {
                    let f = found.get_or_insert_with(|| Found { count: 0, first: unravel(&l.shape, pos), others: Vec::new() });
                    f.count += 1;
                    if let Some(Writer::Other(name)) = w
                        && !f.others.contains(&name)
                    {
                        f.others.push(name);
                    }
                }
                pos += 1;
            }
        });
        found
    }
}

/// The index of row-major position `pos` in an array of `shape`.
pub(super) fn unravel(shape: &[usize], mut pos: usize) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (i, &n) in index.iter_mut().zip(shape).rev() {
        *i = pos % n.max(1);
        pos /= n.max(1);
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_count_and_find_per_cell() {
        let whole = Layout::row_major(&[2, 4]);
        let left = Layout { offset: 0, shape: vec![2, 2], strides: vec![4, 1] };
        let column = Layout { offset: 3, shape: vec![2], strides: vec![4] };
        let mut w = PsumWrites::new(8);
        assert_eq!(w.census(&whole), Census { any_unwritten: true, all_unwritten: true, any_other: false });
        w.mark(&left, Writer::Other("nisa.memset"));
        w.mark(&column, Writer::Matmul);
        w.mark(&Layout { offset: 5, shape: vec![1], strides: vec![1] }, Writer::Other("nisa.tensor_copy"));
        // Cells: [m m . M / m c . M] with m memset, c tensor_copy, M matmul.
        assert_eq!(w.census(&whole), Census { any_unwritten: true, all_unwritten: false, any_other: true });
        assert_eq!(w.census(&column), Census { any_unwritten: false, all_unwritten: false, any_other: false });
        assert_eq!(w.census(&left), Census { any_unwritten: false, all_unwritten: false, any_other: true });
        assert_eq!(w.written(&whole), vec![true, true, false, true, true, true, false, true]);
        let others = w.find(&whole, |x| matches!(x, Some(Writer::Other(_)))).expect("memset cells");
        assert_eq!((others.count, others.first, others.others), (4, vec![0, 0], vec!["nisa.memset", "nisa.tensor_copy"]));
        let unwritten = w.find(&whole, |x| x.is_none()).expect("two unwritten cells");
        assert_eq!((unwritten.count, unwritten.first, unwritten.others), (2, vec![0, 2], vec![]));
        assert!(w.find(&column, |x| x != Some(Writer::Matmul)).is_none());
    }

    #[test]
    fn whole_writes_keep_one_code_and_answer_as_per_cell_ones() {
        let whole = Layout::row_major(&[2, 4]);
        let left = Layout { offset: 0, shape: vec![2, 2], strides: vec![4, 1] };
        let mut w = PsumWrites::new(8);
        w.mark(&whole, Writer::Other("nisa.memset"));
        w.mark(&whole, Writer::Matmul);
        w.mark(&left, Writer::Matmul);
        assert!(w.codes.is_empty(), "whole writes and writes of the code every cell holds keep one code");
        assert_eq!(w.census(&left), Census { any_unwritten: false, all_unwritten: false, any_other: false });
        assert_eq!(w.written(&whole), vec![true; 8]);
        assert!(w.find(&whole, |x| x != Some(Writer::Matmul)).is_none());
        let empty = Layout { offset: 0, shape: vec![0, 4], strides: vec![4, 1] };
        assert_eq!(w.census(&empty), Census { any_unwritten: false, all_unwritten: true, any_other: false });
        // A part written by another instruction gives every cell its own code.
        w.mark(&left, Writer::Other("nisa.tensor_copy"));
        assert_eq!(w.census(&whole), Census { any_unwritten: false, all_unwritten: false, any_other: true });
        let others = w.find(&whole, |x| matches!(x, Some(Writer::Other(_)))).expect("copied cells");
        assert_eq!((others.count, others.first, others.others), (4, vec![0, 0], vec!["nisa.tensor_copy"]));
    }
}
