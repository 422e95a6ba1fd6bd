//! Vector / Scalar / GpSimd element-wise ops: `tensor_copy`, `memset`,
//! `tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`, `reciprocal`.

use super::alu;
use super::enums::Engine;
use super::exec::{Input, copy_tile_raw, mark_written, read_tile_raw, rowwise, write_tile_raw};
use super::operand::{Operand, column};
use super::tile::{TileView, not_psum, same_geometry};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

fn binary_op(op: &str, role: &str, o: NlOp) -> Result<()> {
    if !o.is_binary() {
        return Err(NkiError::constraint(
            op,
            format!("{role}={o} is an activation function; this op takes an ALU op such as nl.add or nl.multiply"),
        ));
    }
    Ok(())
}

pub(super) fn both_psum(op: &str, (ra, a): (&str, &Tensor), (rb, b): (&str, &Tensor)) -> Result<()> {
    if a.buffer() == Buffer::Psum && b.buffer() == Buffer::Psum {
        return Err(NkiError::constraint(
            op,
            format!("{ra} {} and {rb} {} are both in PSUM; at most one input of this op may be in PSUM", a.describe(), b.describe()),
        ));
    }
    Ok(())
}

fn engine_reach(op: &str, engine: Option<Engine>, tensors: &[(&str, &Tensor)]) -> Result<()> {
    if engine == Some(Engine::Gpsimd) {
        for (role, t) in tensors {
            not_psum(op, role, t, "the GpSimd engine cannot access PSUM")?;
        }
    }
    Ok(())
}

/// Optional arguments of the element-wise ops that only pick an engine.
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineOpts<'a> {
    /// Engine to run on (default: the compiler's choice).
    pub engine: Option<Engine>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.tensor_copy(dst, src)`: on-chip copy; bit-exact for equal dtypes, through fp32 otherwise.
pub fn tensor_copy(ctx: &Ctx, dst: &Tensor, src: &Tensor, opts: EngineOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.tensor_copy";
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::chosen(opts.engine, crate::profile::Unit::Vector), &[src], &[dst])?;
    let (s, d) = (TileView::of(OP, "src", src)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("src", &s), dst, src)?;
    engine_reach(OP, opts.engine, &[("src", src), ("dst", dst)])?;
    if opts.engine == Some(Engine::Scalar) && ctx.generation().nc_version() < 3 {
        return Err(NkiError::constraint(OP, "the Scalar engine has no tensor_copy on trn1; use nisa.activation with op=nl.copy"));
    }
    if src.dtype() == dst.dtype() {
        copy_tile_raw(dst, &d, src, &s);
        return Ok(());
    }
    rowwise(ctx, dst, &d, &[Input { tensor: src, tile: &s }], |_, rows, out| out.copy_from_slice(rows[0]))
}

/// `nisa.memset(dst, value)`: fills an on-chip tile with a constant.
pub fn memset(ctx: &Ctx, dst: &Tensor, value: f64, opts: EngineOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.memset";
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::chosen(opts.engine, crate::profile::Unit::Vector), &[], &[dst])?;
    let d = TileView::of(OP, "dst", dst)?;
    engine_reach(OP, opts.engine, &[("dst", dst)])?;
    if dst.dtype().packs().is_some() && value != 0.0 {
        return Err(NkiError::dtype(
            OP,
            format!(
                "dst {} packs four MX values per element; nisa.memset fills it with zeros only (all bits clear), got {value}",
                dst.describe()
            ),
        ));
    }
    if !dst.dtype().is_float() && value.fract() != 0.0 {
        return Err(NkiError::dtype(OP, format!("value {value} is not an integer but dst {} has an integer dtype", dst.describe())));
    }
    let cell =
        if dst.dtype().is_float() { dst.dtype().f32_to_cell(value as f32, ctx.rounds()) } else { dst.dtype().i64_to_cell(value as i64) };
    let mut cells = dst.write();
    let row = vec![cell; d.nf];
    for p in 0..d.np {
        match d.row_mut(&mut cells, p) {
            Some(r) => r.fill(cell),
            None => d.row_layout(p).scatter_with(&mut cells, &row, |c| c),
        }
    }
    drop(cells);
    mark_written(dst, d.writer);
    Ok(())
}

fn all_int32(ts: &[&Tensor]) -> bool {
    ts.iter().all(|t| matches!(t.dtype(), Dtype::I32 | Dtype::U32))
}

/// `nisa.tensor_tensor(dst, data1, data2, op)`: `dst = data1 op data2` element-wise.
///
/// Arithmetic runs in fp32 and rounds once to `dst.dtype`; when every operand is
/// int32/uint32 the op runs in exact integer arithmetic, as the GpSimd engine does.
pub fn tensor_tensor(ctx: &Ctx, dst: &Tensor, data1: &Tensor, data2: &Tensor, op: NlOp, opts: EngineOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.tensor_tensor";
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::chosen(opts.engine, crate::profile::Unit::Vector), &[data1, data2], &[dst])?;
    binary_op(OP, "op", op)?;
    let (a, b, d) = (TileView::of(OP, "data1", data1)?, TileView::of(OP, "data2", data2)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("data1", &a), ("data2", &b), data1, data2)?;
    same_geometry(OP, ("dst", &d), ("data1", &a), dst, data1)?;
    both_psum(OP, ("data1", data1), ("data2", data2))?;
    engine_reach(OP, opts.engine, &[("data1", data1), ("data2", data2), ("dst", dst)])?;
    if all_int32(&[dst, data1, data2])
        && let Some(_) = op.apply_int(0, 0)
    {
        let (x, y) = (read_tile_raw(data1, &a), read_tile_raw(data2, &b));
        let out: Vec<f32> = x
            .iter()
            .zip(&y)
            .map(|(&u, &v)| {
                let r = op.apply_int(data1.dtype().cell_to_i64(u), data2.dtype().cell_to_i64(v)).unwrap_or_default();
                dst.dtype().i64_to_cell(r)
            })
            .collect();
        write_tile_raw(dst, &d, &out);
        return Ok(());
    }
    rowwise(ctx, dst, &d, &[Input { tensor: data1, tile: &a }, Input { tensor: data2, tile: &b }], |_, rows, out| {
        alu::binary(op, rows[0], rows[1], out)
    })
}

/// Optional arguments of [`tensor_scalar`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorScalarOpts<'a> {
    /// Compute `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: Option<bool>,
    /// Second op (with `operand1`).
    pub op1: Option<NlOp>,
    /// Second operand.
    pub operand1: Option<Operand<'a>>,
    /// Compute `operand1 op1 t` instead of `t op1 operand1`.
    pub reverse1: Option<bool>,
    /// Engine.
    pub engine: Option<Engine>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.tensor_scalar(dst, data, op0, operand0, op1=, operand1=)`:
/// `dst = (data op0 operand0) op1 operand1`, operands scalars or `(P,1)` columns.
pub fn tensor_scalar(ctx: &Ctx, dst: &Tensor, data: &Tensor, op0: NlOp, operand0: Operand<'_>, opts: TensorScalarOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.tensor_scalar";
    ctx.begin_op(OP)?;
    // The `(P, 1)` operands are in SBUF with the data (and count toward a partition's bytes).
    let reads: Vec<&Tensor> = [Some(data), operand0.tensor(), opts.operand1.and_then(Operand::tensor)].into_iter().flatten().collect();
    ctx.record(OP, crate::profile::Unit::chosen(opts.engine, crate::profile::Unit::Vector), &reads, &[dst])?;
    let (x, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("data", &x), dst, data)?;
    engine_reach(OP, opts.engine, &[("data", data), ("dst", dst)])?;
    let c0 = column(OP, "operand0", operand0, x.np)?;
    let second = match (opts.op1, opts.operand1) {
        (Some(op), Some(o)) => Some((op, column(OP, "operand1", o, x.np)?)),
        (None, None) => None,
        _ => {
            return Err(NkiError::constraint(OP, "op1 and operand1 must be given together"));
        }
    };
    let (r0, r1) = (opts.reverse0.unwrap_or(false), opts.reverse1.unwrap_or(false));
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |p, rows, out| {
        alu::stage_from(op0, rows[0], out, c0.at(p), r0);
        if let Some((op, c1)) = &second {
            alu::stage(*op, out, c1.at(p), r1);
        }
    })
}

/// Optional arguments of [`scalar_tensor_tensor`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct ScalarTensorTensorOpts<'a> {
    /// `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: Option<bool>,
    /// `operand1 op1 t` instead of `t op1 operand1`.
    pub reverse1: Option<bool>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1)`:
/// `dst = (data op0 operand0) op1 operand1` with `operand0` a scalar or `(P,1)`
/// column and `operand1` a full tile.
#[allow(clippy::too_many_arguments)]
pub fn scalar_tensor_tensor(
    ctx: &Ctx,
    dst: &Tensor,
    data: &Tensor,
    op0: NlOp,
    operand0: Operand<'_>,
    op1: NlOp,
    operand1: &Tensor,
    opts: ScalarTensorTensorOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.scalar_tensor_tensor";
    ctx.begin_op(OP)?;
    let reads: Vec<&Tensor> = [Some(data), operand0.tensor(), Some(operand1)].into_iter().flatten().collect();
    ctx.record(OP, crate::profile::Unit::Vector, &reads, &[dst])?;
    binary_op(OP, "op0", op0)?;
    binary_op(OP, "op1", op1)?;
    let (x, y, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "operand1", operand1)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("data", &x), ("operand1", &y), data, operand1)?;
    same_geometry(OP, ("dst", &d), ("data", &x), dst, data)?;
    both_psum(OP, ("data", data), ("operand1", operand1))?;
    let c0 = column(OP, "operand0", operand0, x.np)?;
    let (r0, r1) = (opts.reverse0.unwrap_or(false), opts.reverse1.unwrap_or(false));
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }, Input { tensor: operand1, tile: &y }], |p, rows, out| {
        alu::with_scalar(op0, rows[0], c0.at(p), r0, out);
        if r1 {
            for (o, &b) in out.iter_mut().zip(rows[1]) {
                *o = op1.apply2(b, *o);
            }
        } else {
            let t = out.to_vec();
            alu::binary(op1, &t, rows[1], out);
        }
    })
}

/// Optional arguments of ops that take only a name.
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct NameOpts<'a> {
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.reciprocal(dst, data)`: `dst = 1 / data` in fp32 on the Vector engine.
pub fn reciprocal(ctx: &Ctx, dst: &Tensor, data: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.reciprocal";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::Vector, &[data], &[dst])?;
    let (x, d) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    same_geometry(OP, ("dst", &d), ("data", &x), dst, data)?;
    rowwise(ctx, dst, &d, &[Input { tensor: data, tile: &x }], |_, rows, out| {
        for (o, &v) in out.iter_mut().zip(rows[0]) {
            *o = 1.0 / v;
        }
    })
}
