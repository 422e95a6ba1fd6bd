//! `sequence_bounds`: the segment each element of a packed sequence belongs to.

use super::elementwise::NameOpts;
use super::exec::{read_tile, write_tile};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// `nisa.sequence_bounds(dst, segment_ids)` (GpSimd): for `(1, n)` segment ids,
/// `dst[0, 0, i]` is the first position of element `i`'s segment (a run of equal
/// ids) and `dst[0, 1, i]` one past its last; padding (id 0) gets `n` and `-1`.
/// Both tiles are in SBUF and float32 or int32; `dst` is `(1, 2, n)`.
pub fn sequence_bounds(ctx: &Ctx, dst: &Tensor, segment_ids: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.sequence_bounds";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(segment_ids)], &[Some(dst)])?;
    for (role, t) in [("segment_ids", segment_ids), ("dst", dst)] {
        if t.buffer() != Buffer::Sbuf {
            return Err(NkiError::constraint(OP, format!("{role} {} must be in SBUF: the GpSimd Engine cannot reach PSUM", t.describe())));
        }
        if !matches!(t.dtype(), Dtype::F32 | Dtype::I32) {
            return Err(NkiError::dtype(OP, format!("{role} {} must be float32 or int32, not {}", t.describe(), t.dtype())));
        }
    }
    let s = TileView::of(OP, "segment_ids", segment_ids)?;
    if s.np != 1 {
        return Err(NkiError::shape(OP, format!("segment_ids {} must have one partition, it has {}", segment_ids.describe(), s.np)));
    }
    let n = s.nf;
    if dst.shape() != [1, 2, n] {
        return Err(NkiError::shape(OP, format!("dst {} must have shape [1, 2, {n}] (start and end per segment id)", dst.describe())));
    }
    let d = TileView::of(OP, "dst", dst)?;
    ctx.validated()?;
    let ids = read_tile(segment_ids, &s);
    let (mut start, mut end) = (vec![0f32; n], vec![0f32; n]);
    for i in 0..n {
        start[i] = if ids[i] == 0.0 {
            n as f32
        } else if i > 0 && ids[i] == ids[i - 1] {
            start[i - 1]
        } else {
            i as f32
        };
    }
    for i in (0..n).rev() {
        end[i] = if ids[i] == 0.0 {
            -1.0
        } else if i + 1 < n && ids[i] == ids[i + 1] {
            end[i + 1]
        } else {
            (i + 1) as f32
        };
    }
    start.extend_from_slice(&end);
    write_tile(ctx, dst, &d, &start);
    Ok(())
}
