//! `tensor_partition_reduce`: fold the partitions of a tile into one (GpSimd Engine).

use super::elementwise::NameOpts;
use super::exec::{read_tile, write_tile};
use super::tile::{TileView, not_psum};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{NkiError, Result, Tensor};

/// The reduction tokens the instruction takes among those nki-rs has
/// (the docs also list `nl.bitwise_or` / `nl.bitwise_and`).
const OPS: [NlOp; 3] = [NlOp::Add, NlOp::Average, NlOp::Maximum];

/// `nisa.tensor_partition_reduce(dst, op, data)`: `dst` (one partition) is
/// `op` folded over the partitions of `data` in partition order, in fp32
/// (`nl.average` is the sum divided by the partition count); `dst` is rounded
/// once. The GpSimd Engine reaches SBUF only.
pub fn tensor_partition_reduce(ctx: &Ctx, dst: &Tensor, op: NlOp, data: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.tensor_partition_reduce";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(data)], &[Some(dst)])?;
    if !OPS.contains(&op) {
        return Err(NkiError::constraint(OP, format!("op={op} cannot reduce across partitions; use nl.add, nl.average or nl.maximum")));
    }
    for (role, t) in [("data", data), ("dst", dst)] {
        not_psum(OP, role, t, "the GpSimd Engine cannot access PSUM")?;
    }
    let (x, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    if d.np != 1 || d.nf != x.nf {
        return Err(NkiError::shape(
            OP,
            format!("dst {} must be 1 partition x {} elements (data's free size), it is {} x {}", dst.describe(), x.nf, d.np, d.nf),
        ));
    }
    ctx.validated()?;
    let rows = read_tile(data, &x);
    let fold = if op == NlOp::Average { NlOp::Add } else { op };
    let mut acc = rows[..x.nf].to_vec();
    for row in rows.chunks(x.nf).skip(1) {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = fold.apply2(*a, v);
        }
    }
    if op == NlOp::Average {
        acc.iter_mut().for_each(|a| *a /= x.np as f32);
    }
    write_tile(ctx, dst, &d, &acc);
    Ok(())
}
