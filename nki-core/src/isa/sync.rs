//! Synchronisation and registers: `core_barrier`, `register_*`, `get_nc_version`.

use super::enums::Engine;
use crate::emulator::Ctx;
use crate::{Buffer, NkiError, Result, Tensor};
use nki_spec::constants::CORE_BARRIER_DATA;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Optional arguments of [`core_barrier`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct CoreBarrierOpts<'a> {
    /// Engine that waits (default GpSimd).
    pub engine: Option<Engine>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `nisa.core_barrier(data, cores)`: both programs of an LNC2 pair wait until both
/// arrive; writes to the shared-HBM `data` before the barrier are visible to both after.
/// `data` may also be an SBUF tile (the spec row's rule), which each program keeps
/// for itself: the barrier then only synchronises the programs.
pub fn core_barrier(ctx: &Ctx, data: &Tensor, cores: &[i64], opts: CoreBarrierOpts<'_>) -> Result<()> {
    const OP: &str = "nisa.core_barrier";
    let _ = opts.engine;
    ctx.begin_op(OP)?;
    ctx.record_waiting(OP, crate::profile::Unit::Sync, &[data], &[], crate::profile::Rendezvous::CoreBarrier)?;
    if !ctx.hw().has_core_barrier {
        return Err(NkiError::constraint(OP, format!("core_barrier needs trn2 or later; the launch targets {}", ctx.generation())));
    }
    if cores != [0, 1] {
        return Err(NkiError::constraint(OP, format!("cores must be (0, 1), got {cores:?}")));
    }
    if ctx.num_programs() != 2 {
        return Err(NkiError::constraint(OP, "core_barrier synchronises an LNC2 pair, but the kernel was launched without an LNC2 grid"));
    }
    if !CORE_BARRIER_DATA.admits(data.buffer().memory()) {
        return Err(NkiError::constraint(OP, format!("data {} {}", data.describe(), CORE_BARRIER_DATA.requirement())));
    }
    ctx.core_barrier().map_err(|e| e.in_op(OP))
}

/// A virtual register: a runtime 32-bit scalar of one program (`nisa.VirtualRegister`).
/// Clones name the same register (as Python names one object).
#[derive(Clone, Debug, Default)]
pub struct Register(Arc<AtomicI64>);

impl Register {
    /// A register holding `v`.
    pub fn new(v: i64) -> Register {
        Register(Arc::new(AtomicI64::new(v)))
    }

    /// The current value.
    pub fn value(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, v: i64) {
        self.0.store(v as i32 as i64, Ordering::Relaxed);
    }
}

/// `nisa.register_alloc(x=None)`: a new register, set to `x` (0 when absent).
pub fn register_alloc(ctx: &Ctx, x: Option<i64>) -> Result<Register> {
    ctx.begin_op("nisa.register_alloc")?;
    ctx.record("nisa.register_alloc", crate::profile::Unit::Sync, &[], &[])?;
    Ok(Register::new(x.unwrap_or(0)))
}

/// The source of [`register_move`]: another register or an immediate.
#[derive(Clone, Debug)]
pub enum RegisterSource {
    /// Copy another register.
    Register(Register),
    /// An immediate integer.
    Immediate(i64),
}

impl From<i64> for RegisterSource {
    fn from(v: i64) -> Self {
        RegisterSource::Immediate(v)
    }
}

impl From<&Register> for RegisterSource {
    fn from(r: &Register) -> Self {
        RegisterSource::Register(r.clone())
    }
}

/// `nisa.register_move(dst, src)`: `dst = src`.
pub fn register_move(ctx: &Ctx, dst: &Register, src: RegisterSource) -> Result<()> {
    ctx.begin_op("nisa.register_move")?;
    ctx.record("nisa.register_move", crate::profile::Unit::Sync, &[], &[])?;
    dst.set(match src {
        RegisterSource::Register(r) => r.value(),
        RegisterSource::Immediate(v) => v,
    });
    Ok(())
}

fn single_element(op: &str, role: &str, t: &Tensor) -> Result<()> {
    t.check_bounds(op)?;
    if t.numel() != 1 {
        return Err(NkiError::shape(op, format!("{role} {} must hold exactly one element", t.describe())));
    }
    if t.buffer() == Buffer::Psum {
        return Err(NkiError::constraint(op, format!("{role} {} must be in SBUF or HBM", t.describe())));
    }
    Ok(())
}

/// `nisa.register_load(dst, src)`: loads the integer in the one-element tensor `src`.
pub fn register_load(ctx: &Ctx, dst: &Register, src: &Tensor) -> Result<()> {
    const OP: &str = "nisa.register_load";
    ctx.begin_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record(OP, crate::profile::Unit::Sync, &[src], &[])?;
    single_element(OP, "src", src)?;
    ctx.validated()?;
    dst.set(src.to_i64_vec()[0]);
    Ok(())
}

/// `nisa.register_store(dst, src)`: writes the register into the one-element tensor `dst`.
pub fn register_store(ctx: &Ctx, dst: &Tensor, src: &Register) -> Result<()> {
    const OP: &str = "nisa.register_store";
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::Sync, &[], &[dst])?;
    single_element(OP, "dst", dst)?;
    let d = dst.dtype();
    let cell = if d.is_float() { d.f32_to_cell(src.value() as f32, ctx.rounds()) } else { d.i64_to_cell(src.value()) };
    dst.layout().scatter_with(&mut dst.write(), &[cell], |c| c);
    Ok(())
}

/// `nisa.get_nc_version()`: 2, 3 or 4 (compare with `nisa.nc_version.*`).
pub fn get_nc_version(ctx: &Ctx) -> i64 {
    i64::from(ctx.generation().nc_version())
}

/// `nisa.get_nc_sub_version()`: the silicon revision within the generation; the
/// emulated cores are the first revision, 0.
pub fn get_nc_sub_version() -> i64 {
    0
}

/// The runtime value of a `scalar_offset=` argument of `.ap()`: a register, or a
/// one-element SBUF tensor holding an integer.
pub trait DynamicOffset {
    /// The offset value.
    fn offset_value(&self) -> Result<i64>;
}

impl DynamicOffset for Register {
    fn offset_value(&self) -> Result<i64> {
        Ok(self.value())
    }
}

impl DynamicOffset for Tensor {
    fn offset_value(&self) -> Result<i64> {
        single_element("ap(scalar_offset=)", "scalar_offset", self)?;
        Ok(self.to_i64_vec()[0])
    }
}
