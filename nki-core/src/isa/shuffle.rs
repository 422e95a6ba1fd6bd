//! `nc_stream_shuffle`: cross-partition moves inside 32-partition quadrants.

use super::exec::{read_tile_raw, write_tile_raw};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{NkiError, Result, Tensor};

/// Optional arguments of [`nc_stream_shuffle`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct ShuffleOpts<'a> {
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.nc_stream_shuffle(dst, src, shuffle_mask)`: within each 32-partition
/// quadrant, dst lane `i` receives src lane `shuffle_mask[i]` (255 leaves the lane
/// unchanged). Data moves bit-exactly; dtypes and free sizes must match.
pub fn nc_stream_shuffle(ctx: &Ctx, dst: &Tensor, src: &Tensor, shuffle_mask: &[i64], opts: ShuffleOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_stream_shuffle";
    let _ = opts.name;
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::Vector, &[src], &[dst])?;
    let (s, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    if src.dtype() != dst.dtype() || s.nf != d.nf {
        return Err(NkiError::shape(
            OP,
            format!("src {} and dst {} must have the same dtype and elements per partition", src.describe(), dst.describe()),
        ));
    }
    if shuffle_mask.len() != 32 || shuffle_mask.iter().any(|&m| !(0..32).contains(&m) && m != 255) {
        return Err(NkiError::constraint(OP, format!("shuffle_mask must hold 32 lane indices in 0..32 or 255, got {shuffle_mask:?}")));
    }
    let active = s.np.max(d.np).div_ceil(32) * 32;
    let allowed: &[usize] = match active {
        96 | 128 => &[0],
        64 => &[0, 64],
        _ => &[0, 32, 64, 96],
    };
    for (role, start) in [("src", s.p0), ("dst", d.p0)] {
        if !allowed.contains(&start) {
            return Err(NkiError::constraint(
                OP,
                format!("{role} starts at partition {start}; with {active} active partitions the start must be one of {allowed:?}"),
            ));
        }
    }
    let vals = read_tile_raw(src, &s);
    let mut out = read_tile_raw(dst, &d);
    for r in 0..d.np {
        let m = shuffle_mask[r % 32];
        if m == 255 {
            continue;
        }
        let from = (r / 32) * 32 + m as usize;
        if from >= s.np {
            return Err(NkiError::shape(
                OP,
                format!("dst lane {r} reads src lane {from}, but src {} has {} partitions", src.describe(), s.np),
            ));
        }
        out[r * d.nf..(r + 1) * d.nf].copy_from_slice(&vals[from * s.nf..(from + 1) * s.nf]);
    }
    write_tile_raw(dst, &d, &out);
    Ok(())
}
