//! `nc_n_gather` and `local_gather`: gathers within SBUF partitions on the GpSimd Engine.

use super::elementwise::NameOpts;
use super::exec::{read_tile_raw, write_tile_raw};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// SBUF partitions per GpSimd core: `local_gather` shares each core's indices
/// among its partitions.
const CORE_PARTITIONS: usize = 16;
/// The elements `local_gather` may copy from each index.
const ELEMS_PER_IDX: [i64; 6] = [1, 2, 4, 8, 16, 32];
/// The most indices one `local_gather` core reads.
const MAX_VALID_INDICES: usize = 4096;

/// Every operand of a GpSimd gather is in SBUF.
fn all_sbuf(op: &'static str, operands: [(&str, &Tensor); 3]) -> Result<()> {
    for (role, t) in operands {
        if t.buffer() != Buffer::Sbuf {
            return Err(NkiError::constraint(op, format!("{role} {} must be in SBUF: the GpSimd Engine cannot reach PSUM", t.describe())));
        }
    }
    Ok(())
}

/// `nisa.nc_n_gather(dst, data, indices)`: per partition, `dst[j] =
/// data_flat[indices[j]]` where `data_flat` is the partition's free elements in
/// order. All three tiles are in SBUF with `data`'s partitions; `indices` is
/// uint32 and shapes `dst`; `dst` has `data`'s dtype (cells move exactly); an
/// index outside the partition's elements is an error.
pub fn nc_n_gather(ctx: &Ctx, dst: &Tensor, data: &Tensor, indices: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_n_gather";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(data), Some(indices)], &[Some(dst)])?;
    all_sbuf(OP, [("dst", dst), ("data", data), ("indices", indices)])?;
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
    ctx.validated()?;
    write_tile_raw(dst, &d, &out);
    Ok(())
}

/// Optional arguments of [`local_gather`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalGatherOpts<'a> {
    /// Consecutive elements copied from each index: 1, 2, 4, 8, 16 or 32 (default 1).
    pub num_elem_per_idx: Option<i64>,
    /// How many of each core's indices are used (default all of them, at most 4096).
    pub num_valid_indices: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.local_gather(dst, src_buffer, index)`: per GpSimd core (16 partitions),
/// the core's uint16 index values, read down its partitions column by column (the
/// first `num_valid_indices`), are free-element offsets; every partition of the
/// core copies `num_elem_per_idx` elements from each offset of its own row, in
/// index order. All in SBUF with `src_buffer`'s partitions (a multiple of 16);
/// `dst` has `src_buffer`'s dtype (cells move exactly) and `num_valid_indices *
/// num_elem_per_idx` elements per partition; an offset whose elements leave the
/// row is an error.
pub fn local_gather(ctx: &Ctx, dst: &Tensor, src_buffer: &Tensor, index: &Tensor, opts: LocalGatherOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.local_gather";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(src_buffer), Some(index)], &[Some(dst)])?;
    all_sbuf(OP, [("dst", dst), ("src_buffer", src_buffer), ("index", index)])?;
    if index.dtype() != Dtype::U16 {
        return Err(NkiError::dtype(OP, format!("index {} must be uint16, not {}", index.describe(), index.dtype())));
    }
    if dst.dtype() != src_buffer.dtype() {
        return Err(NkiError::dtype(OP, format!("dst {} must have src_buffer's dtype {}", dst.describe(), src_buffer.dtype())));
    }
    let (s, i, d) = (TileView::of(OP, "src_buffer", src_buffer)?, TileView::of(OP, "index", index)?, TileView::of(OP, "dst", dst)?);
    if s.np != i.np || s.np % CORE_PARTITIONS != 0 {
        return Err(NkiError::shape(
            OP,
            format!("src_buffer and index must share a partition count that is a multiple of 16 (they have {} and {})", s.np, i.np),
        ));
    }
    let per = opts.num_elem_per_idx.unwrap_or(1);
    if !ELEMS_PER_IDX.contains(&per) {
        return Err(NkiError::argument("num_elem_per_idx", per.to_string(), "must be 1, 2, 4, 8, 16 or 32").in_op(OP));
    }
    let per = per as usize;
    let limit = (CORE_PARTITIONS * i.nf).min(MAX_VALID_INDICES);
    let valid = match opts.num_valid_indices {
        None => CORE_PARTITIONS * i.nf,
        Some(v) => usize::try_from(v).unwrap_or(0),
    };
    if !(1..=limit).contains(&valid) {
        let given = opts.num_valid_indices.map_or(valid.to_string(), |v| v.to_string());
        return Err(
            NkiError::argument("num_valid_indices", given, &format!("must be in 1..={limit} (the core's indices, at most 4096)")).in_op(OP)
        );
    }
    if d.np != s.np || d.nf != valid * per {
        return Err(NkiError::shape(OP, format!("dst {} must be {} partitions x {} elements", dst.describe(), s.np, valid * per)));
    }
    let (src, idx) = (read_tile_raw(src_buffer, &s), read_tile_raw(index, &i));
    let mut out = Vec::with_capacity(d.np * d.nf);
    for core in (0..s.np).step_by(CORE_PARTITIONS) {
        // Offset k of the core: partition k % 16 of the core, column k / 16.
        let mut offsets = Vec::with_capacity(valid);
        for k in 0..valid {
            let o = Dtype::U16.cell_to_i64(idx[(core + k % CORE_PARTITIONS) * i.nf + k / CORE_PARTITIONS]);
            match usize::try_from(o).ok().filter(|&o| o + per <= s.nf) {
                Some(o) => offsets.push(o),
                None => {
                    return Err(NkiError::constraint(
                        OP,
                        format!(
                            "index {o} (core at partition {core}): {per} elements from it leave src_buffer's {} elements per partition",
                            s.nf
                        ),
                    ));
                }
            }
        }
        for p in core..core + CORE_PARTITIONS {
            let row = &src[p * s.nf..(p + 1) * s.nf];
            for &o in &offsets {
                out.extend_from_slice(&row[o..o + per]);
            }
        }
    }
    ctx.validated()?;
    write_tile_raw(dst, &d, &out);
    Ok(())
}
