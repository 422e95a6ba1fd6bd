//! The row-wise executor shared by the compute-engine ops.
//!
//! It takes the locks an op needs (read guards on inputs, one write guard on the
//! destination), hands the op's kernel one partition row at a time, encodes the
//! results in the destination dtype, and records PSUM writes. Inputs that alias the
//! destination are handled without read-after-write hazards: an identical view is
//! copied row by row before the row is overwritten, any other overlap is
//! snapshotted up front.

use super::tile::{TileView, encode_in_place};
use crate::emulator::Ctx;
use crate::tensor::{Cells, Storage, Writer};
use crate::{Buffer, Result, Tensor};
use std::sync::Arc;

enum Source {
    /// Index into the read guards.
    Guard(usize),
    /// Same view as the destination: copy the row out of the destination first.
    SameAsDst,
    /// Overlaps the destination differently: a contiguous copy taken before writing.
    Snapshot(Vec<f32>),
}

/// An operand of a row-wise op.
pub(crate) struct Input<'a> {
    pub tensor: &'a Tensor,
    pub tile: &'a TileView,
}

/// Runs `f(p, rows, out)` for every partition row `p` of `dst`: `rows[i]` is row `p`
/// of input `i` as f32 values, `out` receives the row's f32 results.
pub(crate) fn rowwise(
    ctx: &Ctx,
    dst: &Tensor,
    dtile: &TileView,
    inputs: &[Input<'_>],
    mut f: impl FnMut(usize, &[&[f32]], &mut [f32]),
) -> Result<()> {
    let mut sources = Vec::with_capacity(inputs.len());
    let mut guards: Vec<(*const Storage, Cells<'_>)> = Vec::new();
    for inp in inputs {
        if inp.tensor.same_storage(dst) {
            if inp.tensor.same_cells(dst) && inp.tensor.layout() == dst.layout() {
                sources.push(Source::SameAsDst);
            } else {
                sources.push(Source::Snapshot(snapshot(inp)));
            }
            continue;
        }
        let id = Arc::as_ptr(inp.tensor.storage());
        let idx = match guards.iter().position(|(g, _)| *g == id) {
            Some(i) => i,
            None => {
                guards.push((id, inp.tensor.read()));
                guards.len() - 1
            }
        };
        sources.push(Source::Guard(idx));
    }
    let round = ctx.rounds();
    let mut cells = dst.write();
    let nf = dtile.nf;
    let mut scratch: Vec<Vec<f32>> = vec![Vec::new(); inputs.len()];
    let mut out_buf = vec![0f32; if dtile.contiguous { 0 } else { nf }];
    let mut tmp = Vec::new();
    for p in 0..dtile.np {
        for ((src, inp), sc) in sources.iter().zip(inputs).zip(scratch.iter_mut()) {
            if let Source::SameAsDst = src {
                let r = inp.tile.row(&cells, p, &mut tmp);
                sc.clear();
                sc.extend_from_slice(r);
            }
        }
        let rows: Vec<&[f32]> = sources
            .iter()
            .zip(inputs)
            .zip(scratch.iter_mut())
            .map(|((src, inp), sc)| match src {
                Source::Guard(g) => inp.tile.row(&guards[*g].1, p, sc),
                Source::SameAsDst => &sc[..],
                Source::Snapshot(v) => &v[p * inp.tile.nf..(p + 1) * inp.tile.nf],
            })
            .collect();
        match dtile.row_mut(&mut cells, p) {
            Some(out) => {
                f(p, &rows, out);
                encode_in_place(dtile.dtype, out, round);
            }
            None => {
                f(p, &rows, &mut out_buf);
                dtile.write_row(&mut cells, p, &out_buf, round);
            }
        }
    }
    drop(cells);
    mark_written(dst, dtile.writer);
    Ok(())
}

fn snapshot(inp: &Input<'_>) -> Vec<f32> {
    let cells = inp.tensor.read();
    let mut out = Vec::with_capacity(inp.tile.np * inp.tile.nf);
    let mut sc = Vec::new();
    for p in 0..inp.tile.np {
        out.extend_from_slice(inp.tile.row(&cells, p, &mut sc));
    }
    out
}

/// Reads a whole tile as contiguous f32 rows (`np * nf` values).
pub(crate) fn read_tile(t: &Tensor, tile: &TileView) -> Vec<f32> {
    snapshot(&Input { tensor: t, tile })
}

/// Writes `vals` (`np * nf` values) into the tile `t`, rounding per the precision model.
pub(crate) fn write_tile(ctx: &Ctx, t: &Tensor, tile: &TileView, vals: &[f32]) {
    let mut cells = t.write();
    for p in 0..tile.np {
        tile.write_row(&mut cells, p, &vals[p * tile.nf..(p + 1) * tile.nf], ctx.rounds());
    }
    drop(cells);
    mark_written(t, tile.writer);
}

/// Reads a tile's raw cells (no dtype conversion), `np * nf` of them.
pub(crate) fn read_tile_raw(t: &Tensor, tile: &TileView) -> Vec<f32> {
    let cells = t.read();
    let mut out = Vec::with_capacity(tile.np * tile.nf);
    let mut sc = Vec::new();
    for p in 0..tile.np {
        match tile.raw_row(&cells, p) {
            Some(row) => out.extend_from_slice(row),
            None => {
                tile.row_layout(p).gather(&cells, &mut sc);
                out.extend_from_slice(&sc);
            }
        }
    }
    out
}

/// Copies tile `s` of `src` into tile `d` of `dst` bit for bit (the same
/// dtype and geometry): row to row when both tiles are contiguous in
/// different allocations, else through a buffer.
pub(crate) fn copy_tile_raw(dst: &Tensor, d: &TileView, src: &Tensor, s: &TileView) {
    let rows = |to: &mut [f32], from: &[f32]| {
        for p in 0..d.np {
            if let (Some(t), Some(f)) = (d.row_mut(to, p), s.raw_row(from, p)) {
                t.copy_from_slice(f);
            }
        }
    };
    if d.contiguous && s.contiguous && dst.with_cells_of(src, rows) {
        mark_written(dst, d.writer);
    } else {
        write_tile_raw(dst, d, &read_tile_raw(src, s));
    }
}

/// Writes raw cells of the tile's own dtype (a bit-exact move).
pub(crate) fn write_tile_raw(t: &Tensor, tile: &TileView, cells_in: &[f32]) {
    let mut cells = t.write();
    for p in 0..tile.np {
        let vals = &cells_in[p * tile.nf..(p + 1) * tile.nf];
        match tile.row_mut(&mut cells, p) {
            Some(row) => row.copy_from_slice(vals),
            None => tile.row_layout(p).scatter_with(&mut cells, vals, |c| c),
        }
    }
    drop(cells);
    mark_written(t, tile.writer);
}

/// Records that `by` wrote the cells of a PSUM view (`nc_matmul` reads the
/// record for `accumulate=None` and for what it may accumulate onto).
pub(crate) fn mark_written(t: &Tensor, by: Writer) {
    if t.buffer() == Buffer::Psum {
        t.storage().psum_writes().mark(t.layout(), by);
    }
}
