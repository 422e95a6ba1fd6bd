//! Tensor indirection (`.indirect(index, num_elem)`, trn3 and later): a
//! `(P, num_elem)` view of an SBUF tensor whose column i is free element
//! `index[i % 16, i // 16]` of each partition (the offsets of the Vector /
//! Scalar / GpSimd group of 16 partitions; the Tensor Engine's group of 32 is
//! not modelled).
//!
//! The view has its own [`Storage`] mapping its cells to the base's: the
//! offsets are read when an instruction checks its operands and when it takes
//! the cells (the values in memory when it runs), reads gather the base cells
//! and writes scatter the cells that changed.

use super::{Layout, Storage, Tensor};
use crate::{Buffer, ErrorKind, NkiError, Result};
use std::sync::Arc;

/// Partitions per group of the index tile.
const GROUP: usize = 16;

/// Where the cells of a tensor-indirection view live in its base.
pub(crate) struct Indirection {
    /// The 2-d integer SBUF tile of offsets.
    index: Tensor,
    /// Offsets used (the view's free size).
    num: usize,
    /// The base cell of each partition's first free element.
    starts: Vec<isize>,
    /// Free elements per partition of the viewed tensor.
    width: usize,
}

impl Indirection {
    /// The base cell of every element of the view (row-major), or the first
    /// offset outside the partition's free elements.
    pub(crate) fn cells(&self) -> std::result::Result<Vec<usize>, i64> {
        let table = self.index.to_i64_vec();
        let k = self.index.shape().get(1).copied().unwrap_or(1);
        let mut cols = Vec::with_capacity(self.num);
        for i in 0..self.num {
            let c = table.get((i % GROUP) * k + i / GROUP).copied().unwrap_or(-1);
            if !(0..self.width as i64).contains(&c) {
                return Err(c);
            }
            cols.push(c as isize);
        }
        Ok(self.starts.iter().flat_map(|&s| cols.iter().map(move |&c| (s + c) as usize)).collect())
    }

    /// An error naming `op` when an offset lies outside the viewed partition rows.
    pub(crate) fn check(&self, op: &str, view: &Tensor) -> Result<()> {
        self.cells().map(|_| ()).map_err(|c| {
            NkiError::new(
                ErrorKind::Bounds,
                format!(
                    "index {} holds offset {c}, outside the {} free elements of each partition of '{}'",
                    self.index.describe(),
                    self.width,
                    view.name()
                ),
            )
            .in_op(op)
        })
    }
}

impl Tensor {
    /// `.indirect(index, num_elem)`: the `(P, num_elem)` view whose column i is
    /// free element `index[i % 16, i // 16]` of each partition of this SBUF
    /// view (contiguous free dims). `index` is a 2-d integer SBUF tile with
    /// this view's partitions; `num_elem` defaults to its size.
    pub fn indirect(&self, index: &Tensor, num_elem: Option<usize>) -> Result<Tensor> {
        const OP: &str = "indirect";
        self.check_direct(OP)?;
        let refuse = |why: String| Err(NkiError::shape(OP, why));
        if self.buffer() != Buffer::Sbuf || !self.is_contiguous() || self.st.base.is_some() || self.ndim() < 2 {
            return refuse(format!("{} must be an SBUF tensor with contiguous free dims", self.describe()));
        }
        if index.buffer() != Buffer::Sbuf || index.dtype().is_float() || index.ndim() != 2 || index.is_indirect() {
            return refuse(format!("index must be a 2-d integer SBUF tensor, got {}", index.describe()));
        }
        let (np, (ip, ik)) = (self.shape()[0], (index.shape()[0], index.shape()[1]));
        if ip != np {
            return refuse(format!("index {} must have the {np} partitions of {}", index.describe(), self.describe()));
        }
        let n = num_elem.unwrap_or(ip * ik);
        if !(1..=ip * ik).contains(&n) {
            return refuse(format!("num_elem {n} must be in 1..={} (the elements of index {})", ip * ik, index.describe()));
        }
        if let Some(i) = (0..n).find(|i| i % GROUP >= ip || i / GROUP >= ik) {
            return refuse(format!(
                "offset {i} comes from index[{}, {}], outside index {} (offsets snake through groups of {GROUP} partitions)",
                i % GROUP,
                i / GROUP,
                index.describe()
            ));
        }
        self.check_bounds(OP)?;
        let l = &self.layout;
        let starts = (0..np as isize).map(|p| l.offset + p * l.strides[0]).collect();
        let width = l.shape[1..].iter().product();
        let map = Indirection { index: index.clone(), num: n, starts, width };
        let st = Storage::indirection(Arc::clone(&self.st), map, &[np, n]);
        Ok(Tensor { st, layout: Layout::row_major(&[np, n]), rows: None })
    }
}
