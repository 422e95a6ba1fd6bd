//! Strided layouts: how a view's logical elements map to cells of its storage.

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
        let mut shape: Vec<usize> = Vec::with_capacity(self.shape.len());
        let mut strides: Vec<isize> = Vec::with_capacity(self.shape.len());
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 1 {
                continue;
            }
            match (shape.last_mut(), strides.last_mut()) {
                (Some(pn), Some(ps)) if *ps == s * n as isize => {
                    *pn *= n;
                    *ps = s;
                }
                _ => {
                    shape.push(n);
                    strides.push(s);
                }
            }
        }
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
        if self.gather_transposed(cells, out) {
            return;
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

    /// [`Layout::gather`] for a transposing view: the innermost dim strides through
    /// memory while an outer dim `a` is the contiguous one. Copying square blocks of
    /// (`a`, innermost) keeps both the reads and the writes within a few cache lines
    /// instead of touching a new line per element. Returns `false` (and leaves `out`
    /// alone) for other views.
    fn gather_transposed(&self, cells: &[f32], out: &mut Vec<f32>) -> bool {
        const BLOCK: usize = 8;
        let c = self.collapsed();
        let nd = c.shape.len();
        if nd < 2 || c.strides[nd - 1] == 1 || self.shape.contains(&0) {
            return false;
        }
        let Some(a) = c.strides[..nd - 1].iter().rposition(|&s| s == 1) else { return false };
        let out_strides = row_major_strides(&c.shape);
        let (na, nl, sl, oa) = (c.shape[a], c.shape[nd - 1], c.strides[nd - 1], out_strides[a]);
        out.resize(self.numel(), 0.0);
        let outer: Vec<usize> = (0..nd - 1).filter(|&d| d != a).collect();
        let mut idx = vec![0usize; outer.len()];
        let (mut src, mut dst) = (c.offset, 0isize);
        let mut tile = [[0f32; BLOCK]; BLOCK];
        loop {
            for a0 in (0..na).step_by(BLOCK) {
                let bw = BLOCK.min(na - a0);
                for l0 in (0..nl).step_by(BLOCK) {
                    let bh = BLOCK.min(nl - l0);
                    // Contiguous reads into a register-sized tile, then contiguous writes out of it.
                    for (l, row) in tile.iter_mut().enumerate().take(bh) {
                        let s = (src + (l0 + l) as isize * sl) as usize + a0;
                        row[..bw].copy_from_slice(&cells[s..s + bw]);
                    }
                    for i in 0..bw {
                        let o = (dst + (a0 + i) as isize * oa) as usize + l0;
                        for (d, row) in out[o..o + bh].iter_mut().zip(&tile) {
                            *d = row[i];
                        }
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
                src += c.strides[d];
                dst += out_strides[d];
                if idx[k] < c.shape[d] {
                    break;
                }
                src -= c.strides[d] * c.shape[d] as isize;
                dst -= out_strides[d] * c.shape[d] as isize;
                idx[k] = 0;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_merges_row_major_dims() {
        let l = Layout::row_major(&[4, 1, 3, 5]);
        assert_eq!(l.collapsed().shape, vec![60]);
        assert_eq!(l.contiguous_start(), Some(0));
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
