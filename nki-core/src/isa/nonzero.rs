//! `nonzero_with_count`: compaction of nonzero positions on the GpSimd Engine.

use super::exec::{read_tile_raw, write_tile_raw};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// Partitions per GpSimd core: each core reads and writes only its first one.
const CORE_PARTITIONS: usize = 16;

/// Optional arguments of [`nonzero_with_count`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct NonzeroOpts<'a> {
    /// Added to every index written (default 0).
    pub index_offset: Option<i64>,
    /// Fills the slots after the indices (default -1).
    pub padding_val: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.nonzero_with_count(dst, src)`: for partitions 0, 16, ..., 112 (each
/// GpSimd core's first), `dst` row = the positions of `src`'s nonzero elements
/// plus `index_offset`, then `padding_val` up to `src`'s length, then the count;
/// the other partitions of `dst` are left as they are. `src` is float32 or
/// int32 and `dst` int32, both in SBUF, `dst` one element longer per partition.
pub fn nonzero_with_count(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: NonzeroOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nonzero_with_count";
    ctx.begin_generation_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(src)], &[Some(dst)])?;
    for (role, t) in [("src", src), ("dst", dst)] {
        if t.buffer() != Buffer::Sbuf {
            return Err(NkiError::constraint(OP, format!("{role} {} must be in SBUF", t.describe())));
        }
    }
    if !matches!(src.dtype(), Dtype::F32 | Dtype::I32) || dst.dtype() != Dtype::I32 {
        return Err(NkiError::dtype(OP, format!("src {} must be float32 or int32 and dst {} int32", src.describe(), dst.describe())));
    }
    let (x, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    if d.np != x.np || d.nf != x.nf + 1 {
        return Err(NkiError::shape(
            OP,
            format!(
                "dst {} must be {} partitions x {} elements (src's plus the count), it is {} x {}",
                dst.describe(),
                x.np,
                x.nf + 1,
                d.np,
                d.nf
            ),
        ));
    }
    ctx.validated()?;
    let (offset, pad) = (opts.index_offset.unwrap_or(0), opts.padding_val.unwrap_or(-1));
    let vals = read_tile_raw(src, &x);
    let mut out = read_tile_raw(dst, &d);
    for p in (0..x.np).filter(|p| (x.p0 + p) % CORE_PARTITIONS == 0) {
        let row = &vals[p * x.nf..(p + 1) * x.nf];
        let found: Vec<i64> = (0..x.nf).filter(|&j| src.dtype().cell_to_f32(row[j]) != 0.0).map(|j| j as i64 + offset).collect();
        let cells = &mut out[p * d.nf..(p + 1) * d.nf];
        for (j, c) in cells[..x.nf].iter_mut().enumerate() {
            *c = Dtype::I32.i64_to_cell(found.get(j).copied().unwrap_or(pad));
        }
        cells[x.nf] = Dtype::I32.i64_to_cell(found.len() as i64);
    }
    write_tile_raw(dst, &d, &out);
    Ok(())
}
