//! Partition-major access to on-chip operands.
//!
//! Compute engines see an SBUF/PSUM operand as `np` partitions of `nf` elements each
//! (dim 0 is the partition dim, the free dims flatten in logical order). A
//! [`TileView`] validates that a view really has that shape in memory and hands out
//! rows as slices, borrowed when contiguous and gathered otherwise.

use crate::tensor::{Layout, Writer};
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// The compute instructions that read or write packed MX dtypes (`memset`
/// only zeros: it checks its value itself).
const PACKED_OPS: [&str; 3] = ["nisa.quantize_mx", "nisa.nc_matmul_mx", "nisa.memset"];

/// An on-chip operand seen as partitions × free elements.
#[derive(Clone, Debug)]
pub(crate) struct TileView {
    /// Number of partitions.
    pub np: usize,
    /// Elements per partition.
    pub nf: usize,
    /// Cell index of partition row 0's first element.
    base: isize,
    /// Cells between consecutive partition rows.
    pstride: isize,
    /// The free dims (offset 0).
    free: Layout,
    /// Whether each row's elements are consecutive cells.
    pub contiguous: bool,
    /// Element type.
    pub dtype: Dtype,
    /// Index of the first partition used.
    pub p0: usize,
    /// The instruction that writes through this view when it is a destination
    /// (recorded for PSUM cells).
    pub writer: Writer,
}

impl TileView {
    /// Views `t` as a tile; `role` names the operand in messages.
    pub(crate) fn of(op: &'static str, role: &str, t: &Tensor) -> Result<TileView> {
        if !t.buffer().is_on_chip() {
            return Err(NkiError::constraint(
                op,
                format!("{role} {} must be in SBUF or PSUM: compute engines cannot access HBM (use nisa.dma_copy)", t.describe()),
            ));
        }
        if t.dtype().packs().is_some() && !PACKED_OPS.contains(&op) {
            return Err(NkiError::dtype(
                op,
                format!(
                    "{role} {} packs four MX values per element; only DMA, nisa.quantize_mx and nisa.nc_matmul_mx handle it",
                    t.describe()
                ),
            ));
        }
        t.check_bounds(op)?;
        let l = t.layout();
        let pc = t.partition_cells() as isize;
        let (np, pstride) = match (l.shape.first(), l.strides.first()) {
            (Some(&n), Some(&s)) => (n, s),
            _ => (1, 0),
        };
        let free = Layout {
            offset: 0,
            shape: l.shape.get(1..).unwrap_or_default().to_vec(),
            strides: l.strides.get(1..).unwrap_or_default().to_vec(),
        };
        let in_row = l.offset.rem_euclid(pc.max(1));
        let (lo, hi) = free.cell_range().unwrap_or((0, 0));
        let aligned = np <= 1 || (pstride > 0 && pstride % pc == 0);
        if !aligned || in_row + lo < 0 || in_row + hi >= pc {
            return Err(NkiError::constraint(
                op,
                format!(
                    "{role} {} is not a partition-major view: dim 0 must step whole partitions and the free dims must stay inside one partition",
                    t.describe()
                ),
            ));
        }
        let contiguous = free.numel() <= 1 || free.contiguous_start().is_some();
        Ok(TileView {
            np,
            nf: free.numel(),
            base: l.offset,
            pstride,
            free,
            contiguous,
            dtype: t.dtype(),
            p0: (l.offset.div_euclid(pc.max(1))) as usize,
            writer: Writer::Other(op),
        })
    }

    /// The same view written by the Tensor Engine's matmul datapath.
    pub(crate) fn on_tensor_engine(self) -> TileView {
        TileView { writer: Writer::Matmul, ..self }
    }

    /// First cell of partition row `p`.
    #[inline]
    pub(crate) fn row_start(&self, p: usize) -> usize {
        (self.base + p as isize * self.pstride) as usize
    }

    /// The layout of partition row `p`.
    pub(crate) fn row_layout(&self, p: usize) -> Layout {
        Layout { offset: self.row_start(p) as isize, ..self.free.clone() }
    }

    /// Row `p` as `f32` values: borrowed from `cells` when contiguous and of a float
    /// dtype, otherwise gathered (and converted) into `scratch`.
    #[inline]
    pub(crate) fn row<'c>(&self, cells: &'c [f32], p: usize, scratch: &'c mut Vec<f32>) -> &'c [f32] {
        let s = self.row_start(p);
        if self.contiguous && self.dtype.is_float() {
            return &cells[s..s + self.nf];
        }
        self.row_layout(p).gather(cells, scratch);
        if !self.dtype.is_float() {
            let d = self.dtype;
            scratch.iter_mut().for_each(|c| *c = d.cell_to_f32(*c));
        }
        scratch
    }

    /// Writes `vals` into row `p`, encoding them as the tile's dtype (rounded when `round`).
    #[inline]
    pub(crate) fn write_row(&self, cells: &mut [f32], p: usize, vals: &[f32], round: bool) {
        let s = self.row_start(p);
        let d = self.dtype;
        if self.contiguous {
            let row = &mut cells[s..s + self.nf];
            row.copy_from_slice(vals);
            encode_in_place(d, row, round);
        } else {
            self.row_layout(p).scatter_with(cells, vals, |v| d.f32_to_cell(v, round));
        }
    }

    /// Row `p`'s raw cells as a slice of `cells` when the tile is contiguous.
    #[inline]
    pub(crate) fn raw_row<'c>(&self, cells: &'c [f32], p: usize) -> Option<&'c [f32]> {
        let s = self.row_start(p);
        self.contiguous.then(|| &cells[s..s + self.nf])
    }

    /// Row `p` as a mutable slice when the tile is contiguous (values must be encoded
    /// by the caller with [`encode_in_place`]).
    #[inline]
    pub(crate) fn row_mut<'c>(&self, cells: &'c mut [f32], p: usize) -> Option<&'c mut [f32]> {
        if !self.contiguous {
            return None;
        }
        let s = self.row_start(p);
        Some(&mut cells[s..s + self.nf])
    }

    /// Strides of a 2-D (partition, free) tile whose free dims collapse to one
    /// stride, for the GEMM kernel: `(offset, partition_stride, free_stride)`.
    pub(crate) fn matrix(&self) -> Option<(isize, isize, isize)> {
        let c = self.free.collapsed();
        match c.strides.as_slice() {
            [] => Some((self.base, self.pstride, 1)),
            [s] => Some((self.base, self.pstride, *s)),
            _ => None,
        }
    }
}

/// Encodes `f32` results as `dtype` cells in place: rounds floats when `round`,
/// converts integers (round-to-nearest-even, saturating).
#[inline]
pub(crate) fn encode_in_place(dtype: Dtype, vals: &mut [f32], round: bool) {
    if dtype.is_float() {
        if round {
            crate::dtype::round_slice(dtype, vals);
        }
    } else {
        vals.iter_mut().for_each(|v| *v = dtype.f32_to_cell(*v, true));
    }
}

/// Checks that `a` and `b` have the same partition count and free size.
pub(crate) fn same_geometry(op: &str, (ra, a): (&str, &TileView), (rb, b): (&str, &TileView), ta: &Tensor, tb: &Tensor) -> Result<()> {
    if a.np != b.np || a.nf != b.nf {
        return Err(NkiError::shape(
            op,
            format!(
                "{ra} {} is {} partitions x {} elements but {rb} {} is {} x {}; they must match",
                ta.describe(),
                a.np,
                a.nf,
                tb.describe(),
                b.np,
                b.nf
            ),
        ));
    }
    Ok(())
}

/// Rejects a PSUM operand where the engine cannot read or write PSUM.
pub(crate) fn not_psum(op: &str, role: &str, t: &Tensor, why: &str) -> Result<()> {
    if t.buffer() == Buffer::Psum {
        return Err(NkiError::constraint(op, format!("{role} {} cannot be in PSUM: {why}", t.describe())));
    }
    Ok(())
}
