//! The Vector Engine's top-8 search: `max8`, `nc_find_index8` and
//! `nc_match_replace8`, the building blocks of top-k per partition (find the 8
//! largest, locate them, knock them out, repeat).
//!
//! Values are compared in fp32 after converting the inputs; an index that is
//! not found is the all-ones sentinel of the index dtype (`0xFFFF` / `0xFFFFFFFF`).

use super::elementwise::NameOpts;
use super::exec::{read_tile, write_tile};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{Dtype, NkiError, Result, Tensor};
use nki_spec::constants::{TOP8_DATA_RANGE, TOP8_K};

const K: usize = TOP8_K as usize;

/// Checks the searched tile's size and that `other` has its partitions and `want` elements each.
fn check(
    op: &'static str,
    data_role: &str,
    data: &Tensor,
    x: &TileView,
    others: &[(&str, &Tensor, &TileView, Option<usize>)],
) -> Result<()> {
    let (lo, hi) = TOP8_DATA_RANGE;
    if (x.nf as i64) < lo || (x.nf as i64) > hi {
        return Err(NkiError::constraint(
            op,
            format!("{data_role} {} holds {} elements per partition; the instruction searches {lo} to {hi}", data.describe(), x.nf),
        ));
    }
    for (role, t, v, want) in others {
        let nf = want.unwrap_or(x.nf);
        if v.np != x.np || v.nf != nf {
            return Err(NkiError::shape(
                op,
                format!("{role} {} must be {} partitions x {nf} elements, it is {} x {}", t.describe(), x.np, v.np, v.nf),
            ));
        }
    }
    Ok(())
}

/// The all-ones "not found" index of `dtype`, as the value written (it saturates to the dtype's maximum).
fn not_found(dtype: Dtype) -> f32 {
    dtype.int_range().1 as f32
}

fn index_dtype(op: &'static str, role: &str, t: &Tensor) -> Result<()> {
    if !matches!(t.dtype(), Dtype::U32 | Dtype::U16) {
        return Err(NkiError::dtype(op, format!("{role} {} holds indices: it must be uint32 or uint16, not {}", t.describe(), t.dtype())));
    }
    Ok(())
}

/// `nisa.max8(dst, src)`: the 8 largest values of each partition of `src`, in
/// descending order (NaN ranks above every number, so NaN-poisoned input shows).
pub fn max8(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.max8";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(src)], &[Some(dst)])?;
    let (x, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    check(OP, "src", src, &x, &[("dst", dst, &d, Some(K))])?;
    ctx.validated()?;
    let vals = read_tile(src, &x);
    let mut out = Vec::with_capacity(x.np * K);
    for row in vals.chunks(x.nf) {
        let mut sorted = row.to_vec();
        sorted.sort_unstable_by(|a, b| b.is_nan().cmp(&a.is_nan()).then_with(|| b.total_cmp(a)));
        out.extend_from_slice(&sorted[..K]);
    }
    write_tile(ctx, dst, &d, &out);
    Ok(())
}

/// `nisa.nc_find_index8(dst, data, vals)`: for each partition, the index of the
/// first element of `data` equal to each of the 8 `vals`. Equal `vals` take
/// successive matches in ascending order; a value not found gives the all-ones
/// sentinel. `dst` is uint32 or uint16.
pub fn nc_find_index8(ctx: &Ctx, dst: &Tensor, data: &Tensor, vals: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_find_index8";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(data), Some(vals)], &[Some(dst)])?;
    let (x, v, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "vals", vals)?, TileView::of(OP, "dst", dst)?);
    check(OP, "data", data, &x, &[("vals", vals, &v, Some(K)), ("dst", dst, &d, Some(K))])?;
    index_dtype(OP, "dst", dst)?;
    ctx.validated()?;
    let (rows, wanted) = (read_tile(data, &x), read_tile(vals, &v));
    let mut out = Vec::with_capacity(x.np * K);
    for (row, want) in rows.chunks(x.nf).zip(wanted.chunks(K)) {
        let mut taken = vec![false; row.len()];
        for w in want {
            match (0..row.len()).find(|&j| !taken[j] && row[j] == *w) {
                Some(j) => {
                    taken[j] = true;
                    out.push(j as f32);
                }
                None => out.push(not_found(dst.dtype())),
            }
        }
    }
    write_tile(ctx, dst, &d, &out);
    Ok(())
}

/// Optional arguments of [`nc_match_replace8`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct MatchReplace8Opts<'a> {
    /// `(P, 8)` uint32/uint16 tile receiving the replaced positions.
    pub dst_idx: Option<&'a Tensor>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.nc_match_replace8(dst, data, vals, imm)`: `dst` is `data` with the
/// first element equal to each of the 8 `vals` replaced by `imm`. The `vals` are
/// taken last to first, so equal `vals` replace successive occurrences with the
/// first occurrence going to the highest slot; `dst_idx` receives the replaced
/// positions (the all-ones sentinel where a value is not found, a choice of the
/// emulator: the docs leave it open).
pub fn nc_match_replace8(ctx: &Ctx, dst: &Tensor, data: &Tensor, vals: &Tensor, imm: f64, opts: MatchReplace8Opts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_match_replace8";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(data), Some(vals)], &[Some(dst), opts.dst_idx])?;
    let (x, v, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "vals", vals)?, TileView::of(OP, "dst", dst)?);
    check(OP, "data", data, &x, &[("vals", vals, &v, Some(K)), ("dst", dst, &d, None)])?;
    let idx_tile = match opts.dst_idx {
        Some(t) => {
            let iv = TileView::of(OP, "dst_idx", t)?;
            check(OP, "data", data, &x, &[("dst_idx", t, &iv, Some(K))])?;
            index_dtype(OP, "dst_idx", t)?;
            Some((t, iv))
        }
        None => None,
    };
    ctx.validated()?;
    let (mut rows, wanted) = (read_tile(data, &x), read_tile(vals, &v));
    let sentinel = idx_tile.as_ref().map_or(0.0, |(t, _)| not_found(t.dtype()));
    let mut idx = vec![sentinel; x.np * K];
    let imm = imm as f32;
    for ((row, want), slots) in rows.chunks_mut(x.nf).zip(wanted.chunks(K)).zip(idx.chunks_mut(K)) {
        for i in (0..K).rev() {
            if let Some(j) = row.iter().position(|e| *e == want[i]) {
                row[j] = imm;
                slots[i] = j as f32;
            }
        }
    }
    write_tile(ctx, dst, &d, &rows);
    if let Some((t, iv)) = idx_tile {
        write_tile(ctx, t, &iv, &idx);
    }
    Ok(())
}
