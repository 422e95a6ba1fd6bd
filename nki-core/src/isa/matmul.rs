//! Tensor Engine: `nc_matmul` and `nc_transpose`.

use super::enums::{Engine, MatmulPerfMode};
use super::exec::{mark_written, read_tile, read_tile_raw, write_tile, write_tile_raw};
use super::tile::TileView;
use crate::emulator::Ctx;
use crate::hw::Generation;
use crate::numeric::gemm::{Mat, sgemm_split};
use crate::tensor::Writer;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// Optional arguments of [`nc_matmul`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct NcMatmulOpts<'a> {
    /// Hint that `stationary` holds only 0/1; no numeric effect.
    pub is_stationary_onezero: Option<bool>,
    /// Hint that `moving` holds only 0/1; no numeric effect.
    pub is_moving_onezero: Option<bool>,
    /// Transpose mode: `dst = stationaryᵀ` (moving is the identity), dst keeps the input dtype.
    pub is_transpose: Option<bool>,
    /// `Some(true)` accumulates, `Some(false)` overwrites, `None` overwrites cells no
    /// write has touched since the PSUM tensor was allocated and accumulates onto the rest.
    /// `Some(true)` onto never-written cells is an error on every generation, and
    /// onto cells a non-matmul instruction wrote an error where
    /// [`HwLimits::has_accumulate_onto_non_matmul_psum`] is false: the docs call
    /// both undefined behaviour. `None` after a `memset` accumulates onto it (the
    /// compiler infers the flag, and the NKI library relies on it).
    ///
    /// [`HwLimits::has_accumulate_onto_non_matmul_psum`]: crate::hw::HwLimits::has_accumulate_onto_non_matmul_psum
    pub accumulate: Option<bool>,
    /// PE array tile position `(row, col)`.
    pub tile_position: Option<(i64, i64)>,
    /// PE array tile size `(rows, cols)`.
    pub tile_size: Option<(i64, i64)>,
    /// Performance mode.
    pub perf_mode: Option<MatmulPerfMode>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

pub(super) fn in_buffer(op: &str, role: &str, t: &Tensor, want: Buffer) -> Result<()> {
    if t.buffer() != want {
        let hint = if want == Buffer::Psum { " (the Tensor Engine writes only PSUM)" } else { " (the Tensor Engine reads only SBUF)" };
        return Err(NkiError::constraint(op, format!("{role} {} must be in {want}{hint}", t.describe())));
    }
    Ok(())
}

/// A tile as a GEMM operand: strides of (partition, free), gathering when the free
/// dims do not collapse to one stride.
fn as_matrix(t: &Tensor, tile: &TileView) -> (Option<Vec<f32>>, isize, isize, isize) {
    match tile.matrix() {
        Some((off, ps, fs)) if tile.dtype.is_float() => (None, off, ps, fs),
        _ => (Some(read_tile(t, tile)), 0, tile.nf as isize, 1),
    }
}

/// `nisa.nc_matmul(dst, stationary, moving)`: `dst = stationaryᵀ · moving` on the
/// Tensor Engine, contracting over the partition dim, accumulating in fp32 PSUM.
///
/// Checks: dst in PSUM and operands in SBUF; equal partition counts (≤ pmax);
/// stationary free size ≤ `gemm_stationary_fmax`; moving free size ≤
/// `gemm_moving_fmax` of the generation; dst shaped (stationary free, moving free);
/// float operands, both fp32 if either is; dst fp32 (or bf16 on trn3); the
/// accumulation rules of [`NcMatmulOpts::accumulate`].
pub fn nc_matmul(ctx: &Ctx, dst: &Tensor, stationary: &Tensor, moving: &Tensor, opts: NcMatmulOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_matmul";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, crate::profile::Unit::Tensor, &[stationary, moving], &[dst])?;
    in_buffer(OP, "dst", dst, Buffer::Psum)?;
    in_buffer(OP, "stationary", stationary, Buffer::Sbuf)?;
    in_buffer(OP, "moving", moving, Buffer::Sbuf)?;
    let (st, mv) = (TileView::of(OP, "stationary", stationary)?, TileView::of(OP, "moving", moving)?);
    let dt = TileView::of(OP, "dst", dst)?.on_tensor_engine();
    let hw = ctx.hw();
    let transpose = opts.is_transpose.unwrap_or(false);
    if st.np != mv.np {
        return Err(NkiError::shape(
            OP,
            format!(
                "stationary {} has {} partitions but moving {} has {}: the contraction (partition) dims must match",
                stationary.describe(),
                st.np,
                moving.describe(),
                mv.np
            ),
        ));
    }
    if opts.perf_mode == Some(MatmulPerfMode::DoubleRow) {
        return double_row(ctx, dst, &dt, (stationary, &st), (moving, &mv), opts.accumulate);
    }
    if st.nf > hw.gemm_stationary_fmax {
        return Err(NkiError::constraint(
            OP,
            format!("stationary {} has free size {} > gemm_stationary_fmax {}", stationary.describe(), st.nf, hw.gemm_stationary_fmax),
        ));
    }
    let moving_max =
        if dst.dtype() == Dtype::Bf16 && hw.gemm_moving_fmax_bf16_dst > 0 { hw.gemm_moving_fmax_bf16_dst } else { hw.gemm_moving_fmax };
    if mv.nf > moving_max {
        return Err(NkiError::constraint(
            OP,
            format!("moving {} has free size {} > gemm_moving_fmax {} on {}", moving.describe(), mv.nf, moving_max, ctx.generation()),
        ));
    }
    for (role, t) in [("stationary", stationary), ("moving", moving)] {
        if !t.dtype().is_float() {
            return Err(NkiError::dtype(OP, format!("{role} {} must be a float dtype", t.describe())));
        }
    }
    if (stationary.dtype() == Dtype::F32) != (moving.dtype() == Dtype::F32) {
        return Err(NkiError::dtype(
            OP,
            format!("stationary is {} and moving is {}: if either operand is float32 both must be", stationary.dtype(), moving.dtype()),
        ));
    }
    let (m, k) = (st.nf, st.np);
    let n = if transpose { k } else { mv.nf };
    if dt.np != m || dt.nf != n {
        return Err(NkiError::shape(
            OP,
            format!(
                "dst {} is {} partitions x {} elements but stationaryᵀ·moving is {m} x {n} (stationary free x moving free)",
                dst.describe(),
                dt.np,
                dt.nf
            ),
        ));
    }
    if transpose {
        same_dtype("nc_matmul", dst, stationary)?;
        ctx.validated()?;
        write_tile_raw(dst, &dt, &transposed(&read_tile_raw(stationary, &st), k, m));
        return Ok(());
    }
    let psum_ok = dst.dtype() == Dtype::F32 || (dst.dtype() == Dtype::Bf16 && hw.has_bf16_psum);
    if !psum_ok {
        return Err(NkiError::dtype(
            OP,
            format!("dst {} must be float32{} on {}", dst.describe(), if hw.has_bf16_psum { " or bfloat16" } else { "" }, ctx.generation()),
        ));
    }
    let state = accumulation(ctx, OP, dst, opts.accumulate)?;
    ctx.validated()?;
    gemm_into(ctx, dst, &dt, (stationary, &st), (moving, &mv), state)
}

/// `nc_matmul(perf_mode=double_row)`: the contraction runs over the partition
/// dim and a first free dim of 2 (element `(p, j, c)` of the stationary meets
/// `(p, j, c')` of the moving), on float8 operands from NeuronCore-v3; the
/// free-size limits apply to the dims after the pair. The sums are a
/// `2·K`-row matmul's, as the NumPy executor computes them.
fn double_row(
    ctx: &Ctx,
    dst: &Tensor,
    dt: &TileView,
    (stationary, st): (&Tensor, &TileView),
    (moving, mv): (&Tensor, &TileView),
    accumulate: Option<bool>,
) -> Result<()> {
    const OP: &str = "nisa.nc_matmul";
    let hw = ctx.hw();
    if ctx.generation().nc_version() < 3 {
        return Err(NkiError::constraint(OP, format!("perf_mode=double_row needs NeuronCore-v3 or later, not {}", ctx.generation())));
    }
    for (role, t) in [("stationary", stationary), ("moving", moving)] {
        if !matches!(t.dtype(), Dtype::Fp8E4m3 | Dtype::Fp8E5m2) || t.shape().get(1) != Some(&2) {
            return Err(NkiError::shape(
                OP,
                format!("perf_mode=double_row takes float8 operands whose first free dim is 2; {role} is {}", t.describe()),
            ));
        }
    }
    let (k, m, n) = (st.np, st.nf / 2, mv.nf / 2);
    if m > hw.gemm_stationary_fmax || n > hw.gemm_moving_fmax {
        return Err(NkiError::constraint(
            OP,
            format!(
                "double_row operands {} and {} have free sizes {m} and {n} after the pair > gemm_stationary_fmax {} or gemm_moving_fmax {}",
                stationary.describe(),
                moving.describe(),
                hw.gemm_stationary_fmax,
                hw.gemm_moving_fmax
            ),
        ));
    }
    if dst.dtype() != Dtype::F32 || dt.np != m || dt.nf != n {
        return Err(NkiError::shape(OP, format!("dst {} must be float32, {m} partitions x {n} elements", dst.describe())));
    }
    let state = accumulation(ctx, OP, dst, accumulate)?;
    ctx.validated()?;
    // Row `p` of either operand is its pair (j = 0, then 1): as [2·K, free] the rows are `2p + j`.
    let (a, b) = (read_tile(stationary, st), read_tile(moving, mv));
    let mut out = vec![0f32; m * n];
    let (am, bm) = (Mat { offset: 0, rs: 1, cs: m as isize }, Mat { offset: 0, rs: n as isize, cs: 1 });
    sgemm_split(ctx.helpers(), m, 2 * k, n, &a, am, &b, bm, &mut out, Mat { offset: 0, rs: n as isize, cs: 1 }, 0.0);
    write_accumulated(ctx, dst, dt, out, state);
    Ok(())
}

/// Which cells of the destination a matmul adds onto.
pub(super) enum Written {
    None,
    All,
    /// Per element of the view, row-major.
    Mixed(Vec<bool>),
}

/// The cells of `dst` the matmul adds onto, after the docs' accumulation rules:
/// `accumulate=True` needs every cell initialised (adding onto PSUM no write has
/// touched is undefined on every generation), and before trn3 an explicit
/// `accumulate=True` may add only onto values a matmul wrote. `accumulate=None`
/// lets the compiler infer the flag ("first write overwrites, subsequent writes
/// accumulate"): it overwrites the cells no write touched since allocation and
/// adds onto every other one, a memset's or copy's included (the library's
/// `attention_bwd` zeroes a PSUM tile, then accumulates default matmuls onto it).
pub(super) fn accumulation(ctx: &Ctx, op: &str, dst: &Tensor, accumulate: Option<bool>) -> Result<Written> {
    if accumulate == Some(false) {
        return Ok(Written::None);
    }
    let writes = dst.storage().psum_writes();
    let l = dst.layout();
    let census = writes.census(l);
    if accumulate == Some(true)
        && census.any_unwritten
        && let Some(f) = writes.find(l, |w| w.is_none())
    {
        return Err(NkiError::constraint(
            op,
            format!(
                "accumulate=True adds onto {}, but {} of its {} elements (the first at {:?}) hold nothing written since \
                 allocation: accumulating onto uninitialised PSUM is undefined behaviour on every generation; start the \
                 accumulation with accumulate=False (or accumulate=None, which overwrites unwritten cells)",
                dst.describe(),
                f.count,
                dst.numel(),
                f.first
            ),
        ));
    }
    if accumulate == Some(true)
        && census.any_other
        && !ctx.hw().has_accumulate_onto_non_matmul_psum
        && let Some(f) = writes.find(l, |w| matches!(w, Some(Writer::Other(_))))
    {
        let allowed: Vec<String> =
            Generation::ALL.iter().filter(|g| g.limits().has_accumulate_onto_non_matmul_psum).map(|g| g.to_string()).collect();
        return Err(NkiError::constraint(
            op,
            format!(
                "accumulate=True adds onto {}, but {} of its {} elements (the first at {:?}) were last written by {}, not by a \
                 matmul: on {} a matmul accumulating onto PSUM that a non-matmul instruction initialised is undefined \
                 behaviour (allowed only on {}); let a matmul write the cells first (accumulate=False), or leave \
                 accumulate=None for the compiler to infer",
                dst.describe(),
                f.count,
                dst.numel(),
                f.first,
                f.others.join(" and "),
                ctx.generation(),
                allowed.join(", ")
            ),
        ));
    }
    Ok(if !census.any_unwritten {
        Written::All
    } else if census.all_unwritten {
        Written::None
    } else {
        Written::Mixed(writes.written(l))
    })
}

fn gemm_into(
    ctx: &Ctx,
    dst: &Tensor,
    dt: &TileView,
    (stationary, st): (&Tensor, &TileView),
    (moving, mv): (&Tensor, &TileView),
    state: Written,
) -> Result<()> {
    let (m, k, n) = (st.nf, st.np, mv.nf);
    let (sbuf, so, sps, sfs) = as_matrix(stationary, st);
    let (mbuf, mo, mps, mfs) = as_matrix(moving, mv);
    let sguard = stationary.read();
    let mguard = if moving.same_cells(stationary) { None } else { Some(moving.read()) };
    let s_cells: &[f32] = sbuf.as_deref().unwrap_or(&sguard);
    let m_cells: &[f32] = match (&mbuf, &mguard) {
        (Some(b), _) => b,
        (None, Some(g)) => g,
        (None, None) => &sguard,
    };
    let a = Mat { offset: so, rs: sfs, cs: sps };
    let b = Mat { offset: mo, rs: mps, cs: mfs };
    let direct = dt.matrix().filter(|_| !matches!(state, Written::Mixed(_)));
    match direct {
        Some((co, cps, cfs)) => {
            let beta = if matches!(state, Written::All) { 1.0 } else { 0.0 };
            let mut cells = dst.write();
            sgemm_split(ctx.helpers(), m, k, n, s_cells, a, m_cells, b, &mut cells, Mat { offset: co, rs: cps, cs: cfs }, beta);
            if ctx.rounds() && dst.dtype() != Dtype::F32 {
                let d = dst.dtype();
                dst.layout().for_each_run(|start, len, step| {
                    for i in 0..len as isize {
                        let c = &mut cells[(start + i * step) as usize];
                        *c = d.f32_to_cell(*c, true);
                    }
                });
            }
        }
        None => {
            let mut out = vec![0f32; m * n];
            sgemm_split(ctx.helpers(), m, k, n, s_cells, a, m_cells, b, &mut out, Mat { offset: 0, rs: n as isize, cs: 1 }, 0.0);
            drop((sguard, mguard));
            write_accumulated(ctx, dst, dt, out, state);
            return Ok(());
        }
    }
    mark_written(dst, dt.writer);
    Ok(())
}

/// Writes a matmul's fp32 results `out` (the tile's elements, row-major) into
/// `dst`, added onto the cells `state` says were written.
pub(super) fn write_accumulated(ctx: &Ctx, dst: &Tensor, dt: &TileView, mut out: Vec<f32>, state: Written) {
    let prev = read_tile(dst, dt);
    let written: Vec<bool> = match state {
        Written::Mixed(w) => w,
        Written::All => vec![true; out.len()],
        Written::None => vec![false; out.len()],
    };
    for ((o, &p), &w) in out.iter_mut().zip(&prev).zip(&written) {
        if w {
            *o += p;
        }
    }
    write_tile(ctx, dst, dt, &out);
}

/// Checks the spec's rule that `nisa.<op>`'s output `dst` keeps the dtype of
/// its input `src` (the caller applies the rule's condition).
fn same_dtype(op: &str, dst: &Tensor, src: &Tensor) -> Result<()> {
    let row = nki_spec::lookup("nisa", op);
    match row.and_then(|r| Some((r.py, r.same_dtype?))) {
        Some((py, rule)) if dst.dtype() != src.dtype() => {
            Err(NkiError::dtype(py, rule.message(&format!("'{}'", dst.name()), &dst.dtype().to_string(), &src.dtype().to_string())))
        }
        _ => Ok(()),
    }
}

/// Optional arguments of [`nc_transpose`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct NcTransposeOpts<'a> {
    /// `engine.tensor` (PE: SBUF → PSUM, ≤ 128×128) or `engine.vector` (≤ 32×32).
    pub engine: Option<Engine>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.nc_transpose(dst, data)`: swaps the partition and (flattened) free dims,
/// bit-exactly; `dst` must have `data`'s dtype.
pub fn nc_transpose(ctx: &Ctx, dst: &Tensor, data: &Tensor, opts: NcTransposeOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.nc_transpose";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, crate::profile::Unit::chosen(opts.engine, crate::profile::Unit::Tensor), &[data], &[dst])?;
    let (src, dt) = (TileView::of(OP, "data", data)?, TileView::of(OP, "dst", dst)?);
    same_dtype("nc_transpose", dst, data)?;
    if dt.np != src.nf || dt.nf != src.np {
        return Err(NkiError::shape(
            OP,
            format!(
                "data {} is {} x {}, so dst must be {} x {}; dst {} is {} x {}",
                data.describe(),
                src.np,
                src.nf,
                src.nf,
                src.np,
                dst.describe(),
                dt.np,
                dt.nf
            ),
        ));
    }
    let hw = ctx.hw();
    let engine = match opts.engine.unwrap_or_default() {
        Engine::Unknown if data.buffer() == Buffer::Sbuf && dst.buffer() == Buffer::Psum => Engine::Tensor,
        Engine::Unknown => Engine::Vector,
        e => e,
    };
    let (limit, dt) = match engine {
        Engine::Tensor => {
            in_buffer(OP, "data", data, Buffer::Sbuf)?;
            in_buffer(OP, "dst", dst, Buffer::Psum)?;
            // A PE transpose is a matmul against the identity, and PSUM records it as one.
            (hw.pe_transpose_max, dt.on_tensor_engine())
        }
        Engine::Vector => (hw.vector_transpose_max, dt),
        e => {
            return Err(NkiError::constraint(OP, format!("engine {e:?} cannot transpose; use engine.tensor or engine.vector")));
        }
    };
    if src.np > limit || src.nf > limit {
        return Err(NkiError::constraint(
            OP,
            format!(
                "data {} is {} x {}, larger than the {limit} x {limit} a {engine:?}-engine transpose handles",
                data.describe(),
                src.np,
                src.nf
            ),
        ));
    }
    ctx.validated()?;
    write_tile_raw(dst, &dt, &transposed(&read_tile_raw(data, &src), src.np, src.nf));
    Ok(())
}

/// Transposes a row-major `rows x cols` matrix.
fn transposed(vals: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; vals.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = vals[r * cols + c];
        }
    }
    out
}
