//! Random numbers: `rng`, `rand2`, `dropout`, `set_rng_seed`, `rand_set_state`
//! and `rand_get_state` on the per-lane XORWOW generators of [`super::xorwow`].
//!
//! Each program has its own generators (lane = partition of the instruction's
//! tile), seeded with 0 when it starts, so every program of every rank draws
//! the same sequence until it is seeded or given a state.

use super::elementwise::{EngineOpts, NameOpts};
use super::enums::Engine;
use super::exec::{read_tile, read_tile_raw, write_tile, write_tile_raw};
use super::operand::{Operand, column};
use super::tile::{TileView, not_psum, same_geometry};
use super::xorwow::{self, Lanes};
use crate::emulator::Ctx;
use crate::hw::Generation;
use crate::profile::Unit;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// The generator states of one program: the Vector and the GpSimd lanes.
#[derive(Clone, Debug)]
pub(crate) struct RngState {
    vector: Lanes,
    gpsimd: Lanes,
}

impl RngState {
    /// Every lane of both engines seeded with 0, as when a program starts.
    pub(crate) fn new(lanes: usize) -> RngState {
        RngState { vector: Lanes::seeded(Engine::Vector, lanes, 0), gpsimd: Lanes::seeded(Engine::Gpsimd, lanes, 0) }
    }

    fn lanes(&mut self, engine: Engine) -> &mut Lanes {
        if engine == Engine::Gpsimd { &mut self.gpsimd } else { &mut self.vector }
    }

    /// Reseeds every Vector lane from `seed`.
    pub(crate) fn seed_vector(&mut self, seed: u32) {
        let n = self.vector.count();
        self.vector = Lanes::seeded(Engine::Vector, n, seed);
    }

    /// Draws for tile `t` (`np x nf`) from `engine`'s lanes `t.p0 ..`, row-major.
    pub(crate) fn draws(&mut self, engine: Engine, t: &TileView) -> Vec<u32> {
        let lanes = self.lanes(engine);
        (t.p0..t.p0 + t.np).flat_map(|p| lanes.draw(p, t.nf)).collect()
    }
}

/// The engine an instruction with an `engine=` argument draws on: `default` when
/// absent or `unknown`; an error when the engine has no generator for the op, or
/// only from a later generation (`allowed`: engine and the first generation with it).
fn rng_engine(ctx: &Ctx, op: &'static str, engine: Option<Engine>, default: Engine, allowed: &[(Engine, Generation)]) -> Result<Engine> {
    let e = match engine.unwrap_or(default) {
        Engine::Unknown => default,
        e => e,
    };
    let names = || allowed.iter().map(|(e, _)| format!("nisa.engine.{}", e.name())).collect::<Vec<_>>().join(" or ");
    match allowed.iter().find(|(a, _)| *a == e) {
        None => Err(NkiError::argument("engine", format!("nisa.engine.{}", e.name()), &format!("must be {}", names())).in_op(op)),
        Some((_, first)) if ctx.generation().nc_version() < first.nc_version() => Err(NkiError::constraint(
            op,
            format!("engine nisa.engine.{} has a random generator from {first} on; the launch targets {}", e.name(), ctx.generation()),
        )),
        Some(_) => Ok(e),
    }
}

/// The profiler's unit for an engine.
fn unit(e: Engine) -> Unit {
    Unit::chosen(Some(e), Unit::Vector)
}

/// `nisa.rng(dst, engine=vector)`: 32 random bits per element of `dst`, keeping
/// the low bits its integer dtype holds (int8 .. uint32). The Vector engine has a
/// generator on every generation, the GpSimd engine from trn2 on (SBUF only).
pub fn rng(ctx: &Ctx, dst: &Tensor, opts: EngineOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.rng";
    ctx.begin_op(OP)?;
    let engine =
        rng_engine(ctx, OP, opts.engine, Engine::Vector, &[(Engine::Vector, Generation::Trn1), (Engine::Gpsimd, Generation::Trn2)])?;
    ctx.record(OP, unit(engine), &[], &[dst])?;
    let d = TileView::of(OP, "dst", dst)?;
    if dst.dtype().is_float() {
        return Err(NkiError::dtype(OP, format!("dst {} must have an integer dtype (int8 .. uint32)", dst.describe())));
    }
    if engine == Engine::Gpsimd {
        not_psum(OP, "dst", dst, "the GpSimd Engine cannot access PSUM")?;
    }
    let bits = ctx.rng().draws(engine, &d);
    let cells: Vec<f32> = bits.iter().map(|&b| low_bits(dst.dtype(), b)).collect();
    write_tile_raw(dst, &d, &cells);
    Ok(())
}

/// The cell of an integer dtype holding the low bits of `bits` that fit it.
fn low_bits(dtype: Dtype, bits: u32) -> f32 {
    dtype.i64_to_cell(match dtype {
        Dtype::I8 => i64::from(bits as u8 as i8),
        Dtype::U8 => i64::from(bits as u8),
        Dtype::I16 => i64::from(bits as u16 as i16),
        Dtype::U16 => i64::from(bits as u16),
        Dtype::I32 => i64::from(bits as i32),
        _ => i64::from(bits),
    })
}

/// `nisa.rand2(dst, min, max)` (trn3): `dst = min + u * (max - min)` in float32,
/// `u = (bits >> 8) * 2^-24` uniform in [0, 1) from the Vector lanes; `min` and
/// `max` are numbers or `(P, 1)` columns with `min < max`; the result rounds to
/// `dst`'s dtype.
pub fn rand2(ctx: &Ctx, dst: &Tensor, min: Operand<'_>, max: Operand<'_>, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.rand2";
    let _ = opts;
    ctx.begin_generation_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[min.tensor(), max.tensor()], &[Some(dst)])?;
    let d = TileView::of(OP, "dst", dst)?;
    let (lo, hi) = (column(OP, "min", min, d.np)?, column(OP, "max", max, d.np)?);
    if let Some(p) = (0..d.np).find(|&p| lo.at(p).partial_cmp(&hi.at(p)) != Some(std::cmp::Ordering::Less)) {
        return Err(NkiError::argument("min", lo.at(p), &format!("must be less than max ({} at partition {p})", hi.at(p))).in_op(OP));
    }
    ctx.validated()?;
    let bits = ctx.rng().draws(Engine::Vector, &d);
    let vals: Vec<f32> = bits
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let p = i / d.nf;
            let (a, b_) = (lo.at(p), hi.at(p));
            a + xorwow::uniform(b) * (b_ - a)
        })
        .collect();
    write_tile(ctx, dst, &d, &vals);
    Ok(())
}

/// `nisa.dropout(dst, data, prob)`: `dst = data` where a uniform Vector draw `u`
/// is at least `prob` (a number or a `(P, 1)` column), 0 elsewhere, without
/// rescaling; `dst` has `data`'s dtype and geometry.
pub fn dropout(ctx: &Ctx, dst: &Tensor, data: &Tensor, prob: Operand<'_>, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.dropout";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(data), prob.tensor()], &[Some(dst)])?;
    if dst.dtype() != data.dtype() {
        return Err(NkiError::dtype(OP, format!("dst {} must have data's dtype {}", dst.describe(), data.dtype())));
    }
    if let Some(p) = prob.tensor()
        && !data.dtype().is_float()
        && p.dtype() != Dtype::F32
    {
        return Err(NkiError::dtype(
            OP,
            format!("prob {} must be float32 when data {} has an integer dtype", p.describe(), data.describe()),
        ));
    }
    dropout_into(ctx, OP, ("data", data), ("dst", dst), ("prob", prob))
}

/// Writes `data` into `dst` (equal geometry), zeroing the elements whose Vector
/// draw (taken for `data`'s lanes) is below their partition's probability; the
/// operands are named by their roles in `op`'s messages.
pub(crate) fn dropout_into(
    ctx: &Ctx,
    op: &'static str,
    (data_role, data): (&str, &Tensor),
    (dst_role, dst): (&str, &Tensor),
    (prob_role, prob): (&str, Operand<'_>),
) -> Result<()> {
    let (x, d) = (TileView::of(op, data_role, data)?, TileView::of(op, dst_role, dst)?);
    same_geometry(op, (dst_role, &d), (data_role, &x), dst, data)?;
    let prob = column(op, prob_role, prob, x.np)?;
    ctx.validated()?;
    let bits = ctx.rng().draws(Engine::Vector, &x);
    let mut vals = read_tile(data, &x);
    for (i, v) in vals.iter_mut().enumerate() {
        if xorwow::uniform(bits[i]) < prob.at(i / x.nf) {
            *v = 0.0;
        }
    }
    write_tile(ctx, dst, &d, &vals);
    Ok(())
}

/// `nisa.set_rng_seed(src_seeds)`: reseeds every Vector lane from the 32-bit
/// value of the `[1, 1]` on-chip tensor `src_seeds` (its bit pattern).
pub fn set_rng_seed(ctx: &Ctx, src_seeds: &Tensor, opts: NameOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.set_rng_seed";
    let _ = opts;
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_spec(OP, &[Some(src_seeds)], &[])?;
    seed_vector_from(ctx, OP, "src_seeds", src_seeds)
}

/// Reseeds every Vector lane from the bit pattern of `t`, a `[1, 1]` on-chip
/// tensor of a 32-bit dtype (`role` in `op`'s messages).
pub(crate) fn seed_vector_from(ctx: &Ctx, op: &'static str, role: &str, t: &Tensor) -> Result<()> {
    let s = TileView::of(op, role, t)?;
    if s.np != 1 || s.nf != 1 || t.dtype().size_bytes() != 4 {
        return Err(NkiError::shape(op, format!("{role} {} must be a [1, 1] tensor of a 32-bit dtype", t.describe())));
    }
    ctx.validated()?;
    let seed = read_tile_raw(t, &s)[0].to_bits();
    ctx.rng().seed_vector(seed);
    Ok(())
}

/// Fills the fresh tensor `t` with uniform [0, 1) draws rounded to its dtype: row
/// `p` of an on-chip tensor from Vector lane `p`, an HBM tensor's elements in
/// order from lane 0 (`nl.rand`).
pub(crate) fn fill_uniform(ctx: &Ctx, op: &'static str, t: &Tensor) -> Result<()> {
    if t.buffer().is_on_chip() {
        let d = TileView::of(op, "result", t)?;
        let vals: Vec<f32> = ctx.rng().draws(Engine::Vector, &d).into_iter().map(xorwow::uniform).collect();
        write_tile(ctx, t, &d, &vals);
    } else {
        let (dtype, round) = (t.dtype(), ctx.rounds());
        let cells: Vec<f32> =
            ctx.rng().vector.draw(0, t.numel()).into_iter().map(|b| dtype.f32_to_cell(xorwow::uniform(b), round)).collect();
        t.layout().scatter_with(&mut t.write(), &cells, |c| c);
    }
    Ok(())
}

/// The engine a state instruction uses: GpSimd (trn2+, the default) or Vector (trn3).
fn state_engine(ctx: &Ctx, op: &'static str, engine: Option<Engine>) -> Result<Engine> {
    rng_engine(ctx, op, engine, Engine::Gpsimd, &[(Engine::Gpsimd, Generation::Trn2), (Engine::Vector, Generation::Trn3)])
}

/// The tile of a state operand (`src_seeds` / `dst`): uint32, one lane state of
/// `engine` (6 or 24 words) per partition, in SBUF for the GpSimd engine.
fn state_tile(op: &'static str, role: &str, t: &Tensor, engine: Engine) -> Result<TileView> {
    let tile = TileView::of(op, role, t)?;
    let width = xorwow::streams(engine) * xorwow::WORDS;
    if t.dtype() != Dtype::U32 || tile.nf != width {
        return Err(NkiError::shape(
            op,
            format!("{role} {} must be uint32 with {width} elements per partition (the {} XORWOW state)", t.describe(), engine.name()),
        ));
    }
    if engine == Engine::Gpsimd {
        not_psum(op, role, t, "the GpSimd Engine cannot access PSUM")?;
    }
    Ok(tile)
}

/// `nisa.rand_set_state(src_seeds, engine=gpsimd)`: loads each lane's generator
/// state from its partition of the SBUF uint32 tile `src_seeds`.
pub fn rand_set_state(ctx: &Ctx, src_seeds: &Tensor, opts: EngineOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.rand_set_state";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    let engine = state_engine(ctx, OP, opts.engine)?;
    ctx.record(OP, unit(engine), &[src_seeds], &[])?;
    let s = state_tile(OP, "src_seeds", src_seeds, engine)?;
    if src_seeds.buffer() != Buffer::Sbuf {
        return Err(NkiError::constraint(OP, format!("src_seeds {} must be in SBUF", src_seeds.describe())));
    }
    ctx.validated()?;
    let words: Vec<u32> = read_tile_raw(src_seeds, &s).iter().map(|c| c.to_bits()).collect();
    let mut rng = ctx.rng();
    let lanes = rng.lanes(engine);
    for (i, p) in (s.p0..s.p0 + s.np).enumerate() {
        lanes.set_lane(p, &words[i * s.nf..(i + 1) * s.nf]);
    }
    Ok(())
}

/// `nisa.rand_get_state(dst, engine=gpsimd)`: stores each lane's generator state
/// into its partition of the uint32 tile `dst`.
pub fn rand_get_state(ctx: &Ctx, dst: &Tensor, opts: EngineOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.rand_get_state";
    ctx.begin_op(OP)?;
    let engine = state_engine(ctx, OP, opts.engine)?;
    ctx.record(OP, unit(engine), &[], &[dst])?;
    let d = state_tile(OP, "dst", dst, engine)?;
    let mut rng = ctx.rng();
    let lanes = rng.lanes(engine);
    let cells: Vec<f32> = (d.p0..d.p0 + d.np).flat_map(|p| lanes.lane(p).iter().map(|&w| f32::from_bits(w))).collect();
    drop(rng);
    write_tile_raw(dst, &d, &cells);
    Ok(())
}
