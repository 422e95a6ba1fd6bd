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
    fn broadcast_dims_repeat_cells() {
        let cells = [1.0f32, 2.0];
        let b = Layout { offset: 0, shape: vec![2, 3], strides: vec![1, 0] };
        let mut out = Vec::new();
        b.gather(&cells, &mut out);
        assert_eq!(out, vec![1., 1., 1., 2., 2., 2.]);
    }
}
