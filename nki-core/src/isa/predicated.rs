//! `tensor_copy_predicated`: a masked copy on the Vector Engine.

use super::elementwise::both_psum;
use super::exec::{read_tile_raw, write_tile_raw};
use super::operand::Operand;
use super::tile::{TileView, same_geometry};
use crate::emulator::Ctx;
use crate::{Dtype, NkiError, Result, Tensor};

/// Optional arguments of [`tensor_copy_predicated`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct CopyPredicatedOpts<'a> {
    /// Copy where the predicate is zero instead.
    pub reverse_pred: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.tensor_copy_predicated(dst, src, predicate)`: `dst[i] = src[i]` (or the
/// constant `src`) where `predicate[i]` is nonzero (zero with `reverse_pred`);
/// elsewhere `dst` keeps its values. `predicate` is uint8/16/32, `src` has
/// `dst`'s dtype, and they may not both be in PSUM. The copy moves cells
/// exactly (integers of any size included).
pub fn tensor_copy_predicated(ctx: &Ctx, dst: &Tensor, src: Operand<'_>, predicate: &Tensor, opts: CopyPredicatedOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.tensor_copy_predicated";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[src.tensor(), Some(predicate)], &[Some(dst)])?;
    let (d, m) = (TileView::of(OP, "dst", dst)?, TileView::of(OP, "predicate", predicate)?);
    same_geometry(OP, ("dst", &d), ("predicate", &m), dst, predicate)?;
    if !matches!(predicate.dtype(), Dtype::U8 | Dtype::U16 | Dtype::U32) {
        return Err(NkiError::dtype(
            OP,
            format!("predicate {} must be uint8, uint16 or uint32, not {}", predicate.describe(), predicate.dtype()),
        ));
    }
    let values = match src {
        Operand::Tensor(s) => {
            let v = TileView::of(OP, "src", s)?;
            same_geometry(OP, ("dst", &d), ("src", &v), dst, s)?;
            both_psum(OP, ("src", s), ("predicate", predicate))?;
            if s.dtype() != dst.dtype() {
                return Err(NkiError::dtype(OP, format!("src {} and dst {} must share a dtype", s.describe(), dst.describe())));
            }
            read_tile_raw(s, &v)
        }
        Operand::Scalar(x) => vec![dst.dtype().f32_to_cell(x as f32, ctx.rounds()); d.np * d.nf],
    };
    ctx.validated()?;
    let mask = read_tile_raw(predicate, &m);
    let mut cells = read_tile_raw(dst, &d);
    let reverse = opts.reverse_pred.unwrap_or(false);
    for ((c, v), p) in cells.iter_mut().zip(values).zip(mask) {
        if (predicate.dtype().cell_to_i64(p) != 0) != reverse {
            *c = v;
        }
    }
    write_tile_raw(dst, &d, &cells);
    Ok(())
}
