//! Strided layouts: how a view's logical elements map to cells of its storage.

use crate::numeric::transpose::{block8, block16};

/// Offset, shape and strides (in cells) of a view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Cell index of the first element.
    pub offset: isize,
    /// Extent of each dimension.
    pub shape: Vec<usize>,
    /// Cell step of each dimension (0 for a broadcast dimension).
    pub strides: Vec<isize>,
}

impl Layout {
    /// The row-major layout of a fresh allocation.
    pub fn row_major(shape: &[usize]) -> Layout {
        Layout { offset: 0, shape: shape.to_vec(), strides: row_major_strides(shape) }
    }

    /// Number of logical elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Smallest and largest cell index touched, or `None` for an empty view.
    pub fn cell_range(&self) -> Option<(isize, isize)> {
        if self.shape.contains(&0) {
            return None;
        }
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let span = (n as isize - 1) * s;
            if span < 0 { lo += span } else { hi += span }
        }
        Some((lo, hi))
    }

    /// Drops unit dimensions and merges dimensions that are contiguous with each other.
    pub fn collapsed(&self) -> Layout {
        let (shape, [strides]) = collapse_dims(&self.shape, [&self.strides]);
        Layout { offset: self.offset, shape, strides }
    }

    /// If the elements occupy consecutive cells in logical order, their first cell.
    pub fn contiguous_start(&self) -> Option<usize> {
        let c = self.collapsed();
        match c.strides.as_slice() {
            [] | [1] => usize::try_from(c.offset).ok(),
            _ => None,
        }
    }

    /// The view's cells as runs of consecutive cells `(first, len)`, in logical
    /// order; `None` when a run strides.
    pub(crate) fn contiguous_runs(&self) -> Option<Vec<(usize, usize)>> {
        let mut runs = Vec::new();
        let mut all = true;
        self.for_each_run(|start, n, step| match usize::try_from(start) {
            Ok(s) if step == 1 || n == 1 => runs.push((s, n)),
            _ => all = false,
        });
        all.then_some(runs)
    }

    /// Calls `f(first_cell, len, step)` for each run along the innermost (collapsed)
    /// dimension, in logical order.
    pub fn for_each_run(&self, mut f: impl FnMut(isize, usize, isize)) {
        let c = self.collapsed();
        if self.shape.contains(&0) {
            return;
        }
        let nd = c.shape.len();
        if nd == 0 {
            f(c.offset, 1, 1);
            return;
        }
        let (inner_n, inner_s) = (c.shape[nd - 1], c.strides[nd - 1]);
        let outer = &c.shape[..nd - 1];
        let mut idx = vec![0usize; outer.len()];
        let mut base = c.offset;
        loop {
            f(base, inner_n, inner_s);
            let mut d = outer.len();
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                base += c.strides[d];
                if idx[d] < outer[d] {
                    break;
                }
                base -= c.strides[d] * outer[d] as isize;
                idx[d] = 0;
            }
        }
    }

    /// Copies the view's cells, in logical order, out of `cells` into `out`.
    pub fn gather(&self, cells: &[f32], out: &mut Vec<f32>) {
        out.clear();
        if self.transposes() {
            out.resize(self.numel(), 0.0);
            if self.transpose_into(cells, &Layout::row_major(&self.shape), out) {
                return;
            }
            out.clear();
        }
        out.reserve(self.numel());
        self.for_each_run(|start, n, step| {
            if step == 1 {
                let s = start as usize;
                out.extend_from_slice(&cells[s..s + n]);
            } else {
                out.extend((0..n as isize).map(|i| cells[(start + i * step) as usize]));
            }
        });
    }

    /// Whether the innermost dim strides through memory while an outer dim is
    /// contiguous (the views [`Layout::transpose_into`] copies by blocks).
    fn transposes(&self) -> bool {
        let c = self.collapsed();
        matches!(c.strides.split_last(), Some((&last, outer)) if last != 1 && outer.contains(&1))
    }

    /// Copies a transposing view's cells out of `cells` into the cells `out` of
    /// the view `dst` of the same shape, whose innermost dim is contiguous
    /// while the source's is strided and one of the source's outer dims is
    /// contiguous. Copying square blocks of (that dim, innermost) keeps both
    /// the reads and the writes within a few cache lines instead of touching a
    /// new line per element. `false`, and `out` untouched, for other views or
    /// cells out of either slice.
    pub fn transpose_into(&self, cells: &[f32], dst: &Layout, out: &mut [f32]) -> bool {
        let Some(j) = self.joint_collapsed(dst) else { return false };
        let nd = j.shape.len();
        if nd < 2 || j.src[nd - 1] == 1 || j.dst[nd - 1] != 1 || j.shape.contains(&0) {
            return false;
        }
        let Some(a) = j.src[..nd - 1].iter().rposition(|&s| s == 1) else { return false };
        if !j.within(self.offset, &j.src, cells.len()) || !j.within(dst.offset, &j.dst, out.len()) {
            return false;
        }
        let (na, nl, sl, oa) = (j.shape[a], j.shape[nd - 1], j.src[nd - 1], j.dst[a]);
        let outer: Vec<usize> = (0..nd - 1).filter(|&d| d != a).collect();
        let mut idx = vec![0usize; outer.len()];
        let (mut src, mut dst_at) = (self.offset, dst.offset);
        loop {
            for (a16, l16) in (0..na).step_by(2 * BLOCK).flat_map(|a| (0..nl).step_by(2 * BLOCK).map(move |l| (a, l))) {
                let (s0, d0) = (src + l16 as isize * sl + a16 as isize, dst_at + a16 as isize * oa + l16 as isize);
                if a16 + 2 * BLOCK <= na
                    && l16 + 2 * BLOCK <= nl
                    && sl > 0
                    && oa > 0
                    && block16(cells, s0 as usize, sl as usize, out, d0 as usize, oa as usize)
                {
                    continue;
                }
                for a0 in (a16..na.min(a16 + 2 * BLOCK)).step_by(BLOCK) {
                    for l0 in (l16..nl.min(l16 + 2 * BLOCK)).step_by(BLOCK) {
                        let (s0, d0) = (src + l0 as isize * sl + a0 as isize, dst_at + a0 as isize * oa + l0 as isize);
                        transpose_block(cells, s0, sl, out, d0, oa, [BLOCK.min(na - a0), BLOCK.min(nl - l0)]);
                    }
                }
            }
            // Next index of the remaining dims (odometer, last dim fastest).
            let mut k = outer.len();
            loop {
                if k == 0 {
                    return true;
                }
                k -= 1;
                let d = outer[k];
                idx[k] += 1;
                src += j.src[d];
                dst_at += j.dst[d];
                if idx[k] < j.shape[d] {
                    break;
                }
                src -= j.src[d] * j.shape[d] as isize;
                dst_at -= j.dst[d] * j.shape[d] as isize;
                idx[k] = 0;
            }
        }
    }

    /// The dims of `self` and `other` (the same shape) merged where both merge,
    /// size-1 dims dropped; `None` for different shapes.
    fn joint_collapsed(&self, other: &Layout) -> Option<Joint> {
        if self.shape != other.shape {
            return None;
        }
        let (shape, [src, dst]) = collapse_dims(&self.shape, [&self.strides, &other.strides]);
        Some(Joint { shape, src, dst })
    }

    /// Writes `src` (logical order) into the view's cells, transformed by `f`.
    pub fn scatter_with(&self, cells: &mut [f32], src: &[f32], f: impl Fn(f32) -> f32) {
        let mut k = 0;
        self.for_each_run(|start, n, step| {
            if step == 1 {
                let s = start as usize;
                for (d, &v) in cells[s..s + n].iter_mut().zip(&src[k..k + n]) {
                    *d = f(v);
                }
            } else {
                for i in 0..n {
                    cells[(start + i as isize * step) as usize] = f(src[k + i]);
                }
            }
            k += n;
        });
    }
}

/// `shape` with each dim merged into the one before it where it merges in
/// every one of the stride lists (`outer == inner · n`), size-1 dims dropped.
fn collapse_dims<const N: usize>(shape: &[usize], strides: [&[isize]; N]) -> (Vec<usize>, [Vec<isize>; N]) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out: [Vec<isize>; N] = std::array::from_fn(|_| Vec::with_capacity(shape.len()));
    // As far as every list reaches (a zip of the shape with each).
    let dims = strides.iter().fold(shape.len(), |m, s| m.min(s.len()));
    for (d, &n) in shape[..dims].iter().enumerate() {
        if n == 1 {
            continue;
        }
        let merges = |o: &Vec<isize>, s: &[isize]| o.last().is_some_and(|&prev| prev == s[d] * n as isize);
        match out_shape.last_mut() {
            Some(pn) if out.iter().zip(&strides).all(|(o, s)| merges(o, s)) => {
                *pn *= n;
                for (o, s) in out.iter_mut().zip(&strides) {
                    if let Some(last) = o.last_mut() {
                        *last = s[d];
                    }
                }
            }
            _ => {
                out_shape.push(n);
                out.iter_mut().zip(&strides).for_each(|(o, s)| o.push(s[d]));
            }
        }
    }
    (out_shape, out)
}

/// Row-major strides of `shape`.
pub fn row_major_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= n as isize;
    }
    strides
}

/// Two layouts of one shape collapsed together ([`Layout::joint_collapsed`]).
struct Joint {
    shape: Vec<usize>,
    src: Vec<isize>,
    dst: Vec<isize>,
}

impl Joint {
    /// Whether every element, from `offset` by `strides`, is a cell of a
    /// slice of `len` cells.
    fn within(&self, offset: isize, strides: &[isize], len: usize) -> bool {
        let (mut lo, mut hi) = (offset, offset);
        for (&n, &s) in self.shape.iter().zip(strides) {
            let span = (n as isize - 1) * s;
            if span < 0 { lo += span } else { hi += span }
        }
        lo >= 0 && hi < len as isize
    }
}

/// Copies the cells of the runs `from_runs` of `from` into those of `to_runs`
/// of `to` ([`Layout::contiguous_runs`] of two views of as many cells), paired
/// in logical order, a slice at a time; `each` sees every piece written.
pub(crate) fn copy_runs(
    to: &mut [f32],
    to_runs: &[(usize, usize)],
    from: &[f32],
    from_runs: &[(usize, usize)],
    mut each: impl FnMut(&mut [f32]),
) {
    let mut src = from_runs.iter().flat_map(|&(s, n)| (n > 0).then_some((s, n)));
    let mut pending = (0, 0);
    for &(mut at, mut n) in to_runs {
        while n > 0 {
            if pending.1 == 0 {
                let Some(next) = src.next() else { return };
                pending = next;
            }
            let k = n.min(pending.1);
            let piece = &mut to[at..at + k];
            piece.copy_from_slice(&from[pending.0..pending.0 + k]);
            each(piece);
            (at, n, pending) = (at + k, n - k, (pending.0 + k, pending.1 - k));
        }
    }
}

/// The side of the blocks [`Layout::transpose_into`] copies at a time (in
/// squares of four, one [`block16`] where the CPU has it).
const BLOCK: usize = 8;

/// One block of [`Layout::transpose_into`]: `bh` source rows of `bw` cells at
/// `s0` (rows `sl` apart) into `bw` rows of `bh` cells at `d0` (rows `oa`
/// apart), both at most [`BLOCK`].
fn transpose_block(cells: &[f32], s0: isize, sl: isize, out: &mut [f32], d0: isize, oa: isize, [bw, bh]: [usize; 2]) {
    if bw == BLOCK && bh == BLOCK && sl > 0 && oa > 0 && block8(cells, s0 as usize, sl as usize, out, d0 as usize, oa as usize) {
        return;
    }
    // Contiguous reads into a register-sized tile, then contiguous writes out of it.
    let mut tile = [[0f32; BLOCK]; BLOCK];
    for (l, row) in tile.iter_mut().enumerate().take(bh) {
        let s = (s0 + l as isize * sl) as usize;
        row[..bw].copy_from_slice(&cells[s..s + bw]);
    }
    for i in 0..bw {
        let o = (d0 + i as isize * oa) as usize;
        for (d, row) in out[o..o + bh].iter_mut().zip(&tile) {
            *d = row[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_merges_row_major_dims() {
        let l = Layout::row_major(&[4, 1, 3, 5]);
        assert_eq!(l.collapsed().shape, vec![60]);
        assert_eq!(l.contiguous_start(), Some(0));
    }

    /// A transpose into a strided destination (rows of a wider tile, an
    /// offset) against the definition, with blocks whole and cut at both edges.
    #[test]
    fn transposes_into_strided_views_cell_by_cell() {
        for (rows, cols) in [(16, 24), (13, 21), (8, 8), (3, 40), (40, 35)] {
            let cells: Vec<f32> = (0..rows * cols + 5).map(|i| i as f32).collect();
            // Source: the (cols, rows) transpose of a row-major (rows, cols) block at 5.
            let src = Layout { offset: 5, shape: vec![cols, rows], strides: vec![1, cols as isize] };
            let width = rows + 7;
            let dst = Layout { offset: 3, shape: vec![cols, rows], strides: vec![width as isize, 1] };
            let mut out = vec![-1.0; 3 + cols * width];
            assert!(src.transpose_into(&cells, &dst, &mut out));
            for c in 0..cols {
                for r in 0..rows {
                    assert_eq!(out[3 + c * width + r], cells[5 + r * cols + c], "{rows}x{cols}: ({c}, {r})");
                }
                assert!(out[3 + c * width + rows..3 + (c + 1) * width].iter().all(|&v| v == -1.0));
            }
            // A destination reaching past its cells is refused, nothing written.
            let mut short = vec![0.0; 3 + (cols - 1) * width + rows - 1];
            assert!(!src.transpose_into(&cells, &dst, &mut short));
            assert!(short.iter().all(|&v| v == 0.0));
        }
    }

    /// Runs of different lengths pair cell by cell in logical order, as a
    /// gather then a scatter pair them.
    #[test]
    fn copies_run_by_run_in_logical_order() {
        let from: Vec<f32> = (0..40).map(|i| i as f32).collect();
        let src = Layout { offset: 2, shape: vec![2, 4], strides: vec![18, 1] };
        let dst = Layout { offset: 1, shape: vec![4, 2], strides: vec![9, 1] };
        let (to_runs, from_runs) = (dst.contiguous_runs().unwrap(), src.contiguous_runs().unwrap());
        let mut to = vec![-1.0; 40];
        let mut pieces = 0;
        copy_runs(&mut to, &to_runs, &from, &from_runs, |_| pieces += 1);
        let mut want = vec![-1.0; 40];
        let mut cells = Vec::new();
        src.gather(&from, &mut cells);
        dst.scatter_with(&mut want, &cells, |c| c);
        assert_eq!(to, want);
        assert_eq!(pieces, 4);
        // A strided run is not contiguous.
        assert!(Layout { offset: 0, shape: vec![3, 2], strides: vec![1, 3] }.contiguous_runs().is_none());
    }

    #[test]
    fn gather_scatter_round_trip_on_a_transposed_view() {
        let cells: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let t = Layout { offset: 0, shape: vec![4, 3], strides: vec![1, 4] };
        let mut out = Vec::new();
        t.gather(&cells, &mut out);
        assert_eq!(out, vec![0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]);
        let mut back = vec![0f32; 12];
        t.scatter_with(&mut back, &out, |v| v);
        assert_eq!(back, cells);
        assert_eq!(t.contiguous_start(), None);
        assert_eq!(t.cell_range(), Some((0, 11)));
    }

    #[test]
    fn blocked_transposing_gather_matches_elementwise_order() {
        let cells: Vec<f32> = (0..40 * 37 * 3).map(|i| i as f32).collect();
        // (3, 37, 40) view of a (3, 40, 37) buffer with the last two dims swapped,
        // and a 4-d view whose contiguous dim sits in the middle.
        let views = [
            Layout { offset: 0, shape: vec![3, 37, 40], strides: vec![1480, 1, 37] },
            Layout { offset: 5, shape: vec![2, 20, 3, 17], strides: vec![1, 2, 0, 74] },
        ];
        for v in views {
            let mut want = Vec::new();
            v.for_each_run(|start, n, step| want.extend((0..n as isize).map(|i| cells[(start + i * step) as usize])));
            let mut out = vec![7.0];
            v.gather(&cells, &mut out);
            assert_eq!(out, want, "{v:?}");
        }
    }

    #[test]
    fn broadcast_dims_repeat_cells() {
        let cells = [1.0f32, 2.0];
        let b = Layout { offset: 0, shape: vec![2, 3], strides: vec![1, 0] };
        let mut out = Vec::new();
        b.gather(&cells, &mut out);
        assert_eq!(out, vec![1., 1., 1., 2., 2., 2.]);
    }
}
