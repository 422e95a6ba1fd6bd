//! `nc_n_gather`: a gather within each partition on the GpSimd Engine.

use super::elementwise::NameOpts;
use super::exec::{read_tile_raw, write_tile_raw};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// `nisa.nc_n_gather(dst, data, indices)`: per partition, `dst[j] =
/// data_flat[indices[j]]` where `data_flat` is the partition's free elements in
/// order. All three tiles are in SBUF with `data`'s partitions; `indices` is
/// uint32 and shapes `dst`; `dst` has `data`'s dtype (cells move exactly); an
/// index outside the partition's elements is an error.
pub fn nc_n_gather(ctx: &Ctx, dst: &Tensor, data: &Tensor, indices: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_n_gather";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.record_spec(OP, &[Some(data), Some(indices)], &[Some(dst)]);
    for (role, t) in [("dst", dst), ("data", data), ("indices", indices)] {
        if t.buffer() != Buffer::Sbuf {
            return Err(NkiError::constraint(OP, format!("{role} {} must be in SBUF: the GpSimd Engine cannot reach PSUM", t.describe())));
        }
    }
    if indices.dtype() != Dtype::U32 {
        return Err(NkiError::dtype(OP, format!("indices {} must be uint32, not {}", indices.describe(), indices.dtype())));
    }
    if dst.dtype() != data.dtype() {
        return Err(NkiError::dtype(OP, format!("dst {} must have data's dtype {}", dst.describe(), data.dtype())));
    }
    let (x, i, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "indices", indices)?, TileView::of(OP, "dst", dst)?);
    if i.np != x.np || d.np != x.np || d.nf != i.nf {
        return Err(NkiError::shape(
            OP,
            format!(
                "data has {} partitions: indices {} and dst {} must too, with equal elements per partition (they have {} x {} and {} x {})",
                x.np,
                indices.describe(),
                dst.describe(),
                i.np,
                i.nf,
                d.np,
                d.nf
            ),
        ));
    }
    let (vals, idx) = (read_tile_raw(data, &x), read_tile_raw(indices, &i));
    let mut out = Vec::with_capacity(d.np * d.nf);
    for (p, row) in idx.chunks(i.nf.max(1)).enumerate().take(i.np) {
        for &c in row {
            let k = Dtype::U32.cell_to_i64(c);
            let Some(k) = usize::try_from(k).ok().filter(|&k| k < x.nf) else {
                return Err(NkiError::constraint(
                    OP,
                    format!("index {k} in partition {p} is outside data's {} elements per partition", x.nf),
                ));
            };
            out.push(vals[p * x.nf + k]);
        }
    }
    write_tile_raw(dst, &d, &out);
    Ok(())
}
