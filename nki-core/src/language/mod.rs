//! `nki.language` (`nl`): allocation, the SPMD grid, tile-size constants, dtypes,
//! buffers and operator tokens.
#![allow(non_upper_case_globals)]

mod constant;
mod debug;
pub mod elementwise;
pub mod list_bounds;
pub mod loops;
pub mod movement;
mod ops;
mod random;
pub mod reductions;
mod tensor_engine;
mod tiles;

pub use constant::{Constant, shared_constant};
pub use debug::device_print;
pub use loops::WHILE_LOOP_MAX_ITERATIONS;
pub use ops::NlOp;
pub(crate) use ops::prelu_with_slope;
pub use random::{dropout, rand, random_seed};
pub use tensor_engine::{matmul, transpose};
pub use tiles::{FillOpts, LikeOpts, empty_like, full, load, ones, shared_identity_matrix, store, zeros, zeros_like};

use crate::emulator::Ctx;
use crate::emulator::memory::OnChip;
use crate::tensor::Storage;
use crate::{Buffer, Dtype, ErrorKind, Idx, NkiError, Result, Tensor};

/// `nl.tile_size`: hardware tile constants (the spec's).
pub mod tile_size {
    use nki_spec::constants as spec;
    /// Partitions of SBUF / PSUM.
    pub const pmax: i64 = spec::PMAX;
    /// fp32 elements per PSUM bank per partition.
    pub const psum_fmax: i64 = spec::PSUM_FMAX;
    /// fp32 elements per PSUM bank per partition.
    pub const psum_bank_fmax: i64 = spec::PSUM_FMAX;
    /// Bytes per PSUM bank per partition.
    pub const psum_bank_fmax_bytes: i64 = spec::PSUM_BANK_FMAX_BYTES;
    /// Largest free size of a matmul's stationary operand.
    pub const gemm_stationary_fmax: i64 = spec::GEMM_STATIONARY_FMAX;
    /// Largest free size of a matmul's moving operand.
    pub const gemm_moving_fmax: i64 = spec::GEMM_MOVING_FMAX;
    /// Largest free size of `nisa.bn_stats`'s input.
    pub const bn_stats_fmax: i64 = spec::BN_STATS_FMAX;
}

/// `nl.float32`.
pub const float32: Dtype = Dtype::F32;
/// `nl.bfloat16`.
pub const bfloat16: Dtype = Dtype::Bf16;
/// `nl.float16`.
pub const float16: Dtype = Dtype::F16;
/// `nl.float8_e4m3`.
pub const float8_e4m3: Dtype = Dtype::Fp8E4m3;
/// `nl.float8_e4m3fn`.
pub const float8_e4m3fn: Dtype = Dtype::Fp8E4m3Fn;
/// `nl.float8_e5m2`.
pub const float8_e5m2: Dtype = Dtype::Fp8E5m2;
/// `nl.tfloat32`.
pub const tfloat32: Dtype = Dtype::Tf32;
/// `nl.float8_e8m0fnu`.
pub const float8_e8m0fnu: Dtype = Dtype::Fp8E8m0;
/// `nl.float8_e5m2_x4`.
pub const float8_e5m2_x4: Dtype = Dtype::Fp8E5m2x4;
/// `nl.float8_e4m3fn_x4`.
pub const float8_e4m3fn_x4: Dtype = Dtype::Fp8E4m3Fnx4;
/// `nl.float4_e2m1fn_x4`.
pub const float4_e2m1fn_x4: Dtype = Dtype::Fp4E2m1Fnx4;
/// `nl.int32`.
pub const int32: Dtype = Dtype::I32;
/// `nl.uint32`.
pub const uint32: Dtype = Dtype::U32;
/// `nl.int16`.
pub const int16: Dtype = Dtype::I16;
/// `nl.uint16`.
pub const uint16: Dtype = Dtype::U16;
/// `nl.int8`.
pub const int8: Dtype = Dtype::I8;
/// `nl.uint8`.
pub const uint8: Dtype = Dtype::U8;

/// `nl.sbuf`.
pub const sbuf: Buffer = Buffer::Sbuf;
/// `nl.psum`.
pub const psum: Buffer = Buffer::Psum;
/// `nl.hbm` (alias of `nl.private_hbm`).
pub const hbm: Buffer = Buffer::PrivateHbm;
/// `nl.private_hbm`.
pub const private_hbm: Buffer = Buffer::PrivateHbm;
/// `nl.shared_hbm`.
pub const shared_hbm: Buffer = Buffer::SharedHbm;

macro_rules! op_tokens {
    ($($name:ident => $v:ident),* $(,)?) => {$(
        #[doc = concat!("`nl.", stringify!($name), "` as an operator token.")]
        pub const $name: NlOp = NlOp::$v;
    )*};
}

op_tokens! {
    add => Add, subtract => Subtract, multiply => Multiply, divide => Divide,
    maximum => Maximum, minimum => Minimum, power => Power,
    less => Less, less_equal => LessEqual, greater => Greater, greater_equal => GreaterEqual,
    equal => Equal, not_equal => NotEqual, logical_and => LogicalAnd, logical_or => LogicalOr,
    exp => Exp, log => Log, copy => Copy, reciprocal => Reciprocal, sqrt => Sqrt, rsqrt => Rsqrt,
    square => Square, abs => Abs, negative => Negative, tanh => Tanh, sigmoid => Sigmoid,
    relu => Relu, silu => Silu, gelu => Gelu, gelu_apprx_tanh => GeluApprxTanh,
    gelu_apprx_sigmoid => GeluApprxSigmoid, erf => Erf, sin => Sin, cos => Cos, arctan => Arctan,
    softplus => Softplus, mish => Mish, sign => Sign,
    logical_xor => LogicalXor, abs_max => AbsMax, abs_min => AbsMin, fmod => Fmod, r#mod => Mod,
    bitwise_and => BitwiseAnd, bitwise_or => BitwiseOr, bitwise_xor => BitwiseXor, left_shift => LeftShift,
    right_shift => RightShift, ceil => Ceil, floor => Floor, trunc => Trunc, tan => Tan, erf_dx => ErfDx,
    gelu_dx => GeluDx, gelu_apprx_sigmoid_dx => GeluApprxSigmoidDx, silu_dx => SiluDx, logical_not => LogicalNot,
    invert => Invert,
    average => Average, bypass => Bypass, prelu => Prelu,
}

/// Optional arguments of [`ndarray`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct NdarrayOpts<'a> {
    /// Memory space (default `nl.sbuf`).
    pub buffer: Option<Buffer>,
    /// Tensor name.
    pub name: Option<&'a str>,
    /// Explicit `(partition, byte)` address of an on-chip tensor: tensors whose
    /// bytes overlap share them (see [`crate::emulator::memory`]); PSUM tensors
    /// start at a bank boundary.
    pub address: Option<(i64, i64)>,
    /// The name messages use when `name` is absent: the kernel variable the
    /// allocation is bound to, or the default of the op making it. Unlike `name`,
    /// a later binding of the tensor renames it (see [`Tensor::bound`]).
    pub var: Option<&'a str>,
}

/// `nl.ndarray(shape, dtype, buffer=nl.sbuf, name='')`: allocates an uninitialised
/// tensor (its cells hold zero bits, and the launch reports reads of cells nothing
/// wrote: see [`crate::tensor`]'s `unwritten`).
///
/// On-chip tensors are checked against the hardware: at most `pmax` partitions,
/// PSUM tiles within one 2 KiB bank (all 8 on trn3), and an `address` inside the
/// memory. Capacity is a matter of liveness, checked as instructions touch the
/// tensor ([`crate::emulator::memory`]).
pub fn ndarray(ctx: &Ctx, shape: &[i64], dtype: Dtype, opts: NdarrayOpts<'_>) -> Result<Tensor> {
    const OP: &str = "nl.ndarray";
    ctx.begin_op(OP)?;
    let buffer = opts.buffer.unwrap_or(Buffer::Sbuf);
    let explicit = opts.name.filter(|n| !n.is_empty());
    let name = explicit.or(opts.var).unwrap_or("tensor");
    if shape.is_empty() || shape.iter().any(|&d| d < 1) {
        return Err(NkiError::shape(OP, format!("tensor '{name}' has shape {shape:?}; every dim must be at least 1")));
    }
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let numel = crate::tensor::checked_numel(&dims).map_err(|e| NkiError::shape(OP, format!("tensor '{name}': {}", e.message)))?;
    let hw = ctx.hw();
    if buffer.is_on_chip() {
        if dims[0] > hw.pmax {
            return Err(NkiError::constraint(
                OP,
                format!(
                    "{buffer} tensor '{name}' has partition dim {} > pmax {} (dim 0 of an on-chip tensor is the partition dim)",
                    dims[0], hw.pmax
                ),
            ));
        }
        let bytes = dims[1..].iter().product::<usize>() * dtype.size_bytes();
        if buffer == Buffer::Psum && bytes > hw.psum_bytes_per_partition() {
            return Err(NkiError::constraint(
                OP,
                format!(
                    "PSUM tensor '{name}' {shape:?} {dtype} needs {bytes} B per partition, more than PSUM holds on {} ({} banks of {} B)",
                    ctx.generation(),
                    hw.psum_banks,
                    hw.psum_bank_bytes
                ),
            ));
        }
        let kind = if buffer == Buffer::Psum { OnChip::Psum } else { OnChip::Sbuf };
        let lease = ctx.pool.allocate(kind, name, &dims, dtype, opts.address).map_err(|e| e.in_op(OP))?;
        // A placed tile's cells may alias another's bytes (`emulator::memory`),
        // which it reads as they are: only an unplaced one starts in leftovers.
        let reused = if opts.address.is_none() { crate::tensor::leftover(numel) } else { None };
        let leftovers = reused.is_some();
        let cells = reused.unwrap_or_else(|| crate::tensor::filled(numel, Storage::uninit_cell(dtype)));
        let st = Storage::new((name, explicit.is_some()), dtype, buffer, &dims, cells, Some(lease));
        st.start_unwritten(leftovers);
        if let Some(l) = st.lease() {
            ctx.pool.bind(l, &st);
        }
        return Ok(Tensor::from_storage(st));
    }
    let make = || {
        let cells = crate::tensor::filled(numel, Storage::uninit_cell(dtype));
        let st = Storage::new((name, explicit.is_some()), dtype, buffer, &dims, cells, None);
        st.start_unwritten(false);
        Tensor::from_storage(st)
    };
    if buffer == Buffer::SharedHbm {
        ctx.shared_allocation(make, |t| {
            if t.shape() != dims.as_slice() || t.dtype() != dtype {
                return Err(NkiError::new(
                    ErrorKind::Collective,
                    format!(
                        "programs of one rank allocated different shared_hbm tensors at the same point: '{name}' {dims:?} {dtype} vs {}",
                        t.describe()
                    ),
                )
                .in_op(OP));
            }
            Ok(())
        })
    } else {
        Ok(make())
    }
}

/// `nl.program_id(axis)`: this program's index along `axis` of the grid.
pub fn program_id(ctx: &Ctx, axis: i64) -> Result<i64> {
    check_axis("nl.program_id", ctx, axis)?;
    Ok(ctx.program_id() as i64)
}

/// `nl.num_programs(axes)`: the grid extent along `axes`.
pub fn num_programs(ctx: &Ctx, axes: i64) -> Result<i64> {
    check_axis("nl.num_programs", ctx, axes)?;
    Ok(ctx.num_programs() as i64)
}

/// `nl.program_ndim()`: 0 without a grid, 1 with a 1-D grid.
pub fn program_ndim(ctx: &Ctx) -> i64 {
    ctx.program_ndim() as i64
}

/// A new tile named `name` for the intermediate or result of an `nl` function.
fn new_tile(ctx: &Ctx, name: &str, shape: &[usize], dtype: Dtype, buffer: Buffer) -> Result<Tensor> {
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    ndarray(ctx, &dims, dtype, NdarrayOpts { buffer: Some(buffer), var: Some(name), ..Default::default() })
}

/// Refuses an HBM operand `x` (its `role` in `py`): compute engines read only SBUF and PSUM.
fn on_chip(py: &str, role: &str, x: &Tensor) -> Result<()> {
    if !x.buffer().is_on_chip() {
        return Err(NkiError::constraint(
            py,
            format!("{role} {} must be in SBUF or PSUM: compute engines cannot access HBM (nl.load it first)", x.describe()),
        ));
    }
    Ok(())
}

fn check_axis(op: &str, ctx: &Ctx, axis: i64) -> Result<()> {
    if axis != 0 {
        return Err(NkiError::constraint(op, format!("axis {axis} does not exist: the launch grid has {} dims", ctx.program_ndim())));
    }
    Ok(())
}

/// `nl.is_hbm(buffer)`: whether `buffer` is an HBM space (private or shared).
pub fn is_hbm(buffer: Buffer) -> bool {
    !buffer.is_on_chip()
}

/// `nl.is_sbuf(buffer)`: whether `buffer` is SBUF.
pub fn is_sbuf(buffer: Buffer) -> bool {
    buffer == Buffer::Sbuf
}

/// `nl.is_psum(buffer)`: whether `buffer` is PSUM.
pub fn is_psum(buffer: Buffer) -> bool {
    buffer == Buffer::Psum
}

/// `nl.is_on_chip(buffer)`: whether `buffer` is SBUF or PSUM.
pub fn is_on_chip(buffer: Buffer) -> bool {
    buffer.is_on_chip()
}

/// `nl.ds(start, size)`: a slice of `size` positions from `start`.
pub fn ds(start: i64, size: i64) -> Idx {
    Idx::ds(start, size)
}
