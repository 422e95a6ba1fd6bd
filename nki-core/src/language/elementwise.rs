//! The element-wise tile functions: an operator token called on tiles
//! (`nl.add(a, b)`, `nl.exp(x, dtype=nl.bfloat16)`), each returning a new SBUF
//! tile. Each is the one `nisa` instruction NKI lowers it to: an activation
//! function is `nisa.activation` on the Scalar engine; an ALU op on two tiles of
//! one shape is `nisa.tensor_tensor`, and on a tile and a number or a `(P, 1)`
//! column (broadcast along the free dims) `nisa.tensor_scalar`, both on the
//! Vector engine. A `(1, F)` row against a `(P, F)` tile is first broadcast down
//! the partitions on the Tensor engine (`nisa.nc_matmul` of a `(1, P)` row of
//! ones with the row, exact: each output is one product by 1), then
//! `nisa.tensor_tensor`. Other broadcasts are refused with an error naming the
//! shapes.
//!
//! `nl.invert` of an integer tile is `nisa.tensor_tensor` with `nl.bitwise_xor`
//! against a tile of all ones bits of the result's width.
//!
//! `nl.where(condition, x, y)` is a fill with `y` (`nisa.tensor_copy` or
//! `nisa.memset`), a `condition != 0` mask (`nisa.tensor_scalar` into uint8) and a
//! masked copy of `x` (`nisa.tensor_copy_predicated`); `x` and `y` are tiles of
//! `condition`'s shape or numbers.

use super::{FillOpts, full, ones};
use super::{NdarrayOpts, NlOp, ndarray, new_tile, on_chip};
use crate::emulator::Ctx;
use crate::isa::{self as nisa, ActivationOpts, CopyPredicatedOpts, EngineOpts, NcMatmulOpts, Operand, TensorScalarOpts};
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// The dtype of a result of `tiles` when none is asked for: their common dtype,
/// else the float one of most bytes (float32 for bfloat16 with float16), else the
/// integer one of most bytes (int32 on a tie).
pub(crate) fn result_dtype(tiles: &[&Tensor]) -> Dtype {
    let mut kinds: Vec<Dtype> = Vec::new();
    for t in tiles {
        if !kinds.contains(&t.dtype()) {
            kinds.push(t.dtype());
        }
    }
    if let [only] = kinds[..] {
        return only;
    }
    let floats: Vec<Dtype> = kinds.iter().copied().filter(|d| d.is_float()).collect();
    let pool = if floats.is_empty() { &kinds } else { &floats };
    let widest = pool.iter().map(|d| d.size_bytes()).max().unwrap_or(4);
    let best: Vec<Dtype> = pool.iter().copied().filter(|d| d.size_bytes() == widest).collect();
    match best[..] {
        [one] => one,
        _ if !floats.is_empty() => Dtype::F32,
        _ => Dtype::I32,
    }
}

/// A new SBUF tile shaped like `like` for the result of `op`.
fn result_tile(ctx: &Ctx, op: &str, like: &Tensor, dtype: Dtype) -> Result<Tensor> {
    new_tile(ctx, op, like.shape(), dtype, Buffer::Sbuf)
}

/// Refuses a float operand of a token the docs define on integers only.
fn integer_operand(py: &str, op: NlOp, role: &str, operand: Operand<'_>) -> Result<()> {
    if !op.integer_only() {
        return Ok(());
    }
    let float = match operand {
        Operand::Tensor(t) => t.dtype().is_float().then(|| format!("{} has a float dtype", t.describe())),
        Operand::Scalar(v) => (v.fract() != 0.0 || !v.is_finite()).then(|| format!("= {v} is not an integer")),
    };
    match float {
        Some(what) => Err(NkiError::dtype(py, format!("{role} {what}: {op} takes integer tiles and numbers only"))),
        None => Ok(()),
    }
}

/// `op(x)` element-wise into a new SBUF tile (`nisa.activation`).
pub(crate) fn unary(ctx: &Ctx, py: &str, op: NlOp, x: &Tensor, dtype: Option<Dtype>) -> Result<Tensor> {
    on_chip(py, "x", x)?;
    integer_operand(py, op, "x", Operand::Tensor(x))?;
    let out = dtype.unwrap_or(x.dtype());
    if op == NlOp::Invert && !out.is_float() {
        // Exact on integers: XOR with every bit of the result's width set.
        let (lo, hi) = out.int_range();
        let shape: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
        let mask = full(ctx, &shape, if lo == 0 { hi as f64 } else { -1.0 }, out, FillOpts::default())?;
        return binary(ctx, py, NlOp::BitwiseXor, Operand::Tensor(x), Operand::Tensor(&mask), Some(out));
    }
    let dst = result_tile(ctx, op.name(), x, out)?;
    nisa::activation(ctx, &dst, op, x, ActivationOpts::default())?;
    Ok(dst)
}

/// Whether `col` is a `(P, 1)` column of `full`'s partitions, which
/// `nisa.tensor_scalar` broadcasts along the free dims.
fn is_column_of(col: &Tensor, full: &Tensor) -> bool {
    col.shape().len() == full.shape().len() && col.shape()[0] == full.shape()[0] && col.shape()[1..].iter().all(|&d| d == 1)
}

/// Whether `row` is a 2-d `(1, F)` row of `full`'s free size (`full` has more partitions).
fn is_row_of(row: &Tensor, full: &Tensor) -> bool {
    matches!((row.shape(), full.shape()), (&[1, f], &[p, g]) if f == g && p > 1)
}

/// The `(1, F)` tile `row` repeated on `partitions` partitions of a new float32
/// PSUM tile: `onesᵀ · row` on the Tensor engine.
pub(crate) fn partition_broadcast(ctx: &Ctx, row: &Tensor, partitions: usize) -> Result<Tensor> {
    let ones = ones(ctx, &[1, partitions as i64], row.dtype(), FillOpts::default())?;
    let shape = [partitions as i64, row.shape()[1] as i64];
    let dst = ndarray(ctx, &shape, Dtype::F32, NdarrayOpts { buffer: Some(Buffer::Psum), var: Some("broadcast"), ..Default::default() })?;
    nisa::nc_matmul(ctx, &dst, &ones, row, NcMatmulOpts { accumulate: Some(false), ..Default::default() })?;
    Ok(dst)
}

/// `x op y` element-wise into a new SBUF tile.
pub(crate) fn binary(ctx: &Ctx, py: &str, op: NlOp, x: Operand<'_>, y: Operand<'_>, dtype: Option<Dtype>) -> Result<Tensor> {
    integer_operand(py, op, "x", x)?;
    integer_operand(py, op, "y", y)?;
    let scalar = |data: &Tensor, operand: Operand<'_>, reverse: bool| -> Result<Tensor> {
        let tiles: Vec<&Tensor> = [Some(data), operand.tensor()].into_iter().flatten().collect();
        let dst = result_tile(ctx, op.name(), data, dtype.unwrap_or_else(|| result_dtype(&tiles)))?;
        let opts = TensorScalarOpts { reverse0: Some(reverse), ..Default::default() };
        nisa::tensor_scalar(ctx, &dst, data, op, operand, opts)?;
        Ok(dst)
    };
    match (x, y) {
        (Operand::Tensor(a), Operand::Tensor(b)) => {
            on_chip(py, "x", a)?;
            on_chip(py, "y", b)?;
            if a.shape() == b.shape() {
                let dst = result_tile(ctx, op.name(), a, dtype.unwrap_or_else(|| result_dtype(&[a, b])))?;
                nisa::tensor_tensor(ctx, &dst, a, b, op, EngineOpts::default())?;
                Ok(dst)
            } else if is_row_of(a, b) || is_row_of(b, a) {
                let dst_dtype = dtype.unwrap_or_else(|| result_dtype(&[a, b]));
                let (wide, full) = if is_row_of(a, b) {
                    (partition_broadcast(ctx, a, b.shape()[0])?, b)
                } else {
                    (partition_broadcast(ctx, b, a.shape()[0])?, a)
                };
                let dst = result_tile(ctx, op.name(), full, dst_dtype)?;
                let (first, second) = if is_row_of(a, b) { (&wide, b) } else { (a, &wide) };
                nisa::tensor_tensor(ctx, &dst, first, second, op, EngineOpts::default())?;
                Ok(dst)
            } else if is_column_of(b, a) {
                scalar(a, y, false)
            } else if is_column_of(a, b) {
                scalar(b, x, true)
            } else {
                Err(NkiError::shape(
                    py,
                    format!(
                        "x {} and y {} must have one shape, or one must be a (P, 1) column of the other's partitions \
                         (broadcast along the free dims) or a 2-d (1, F) row of its free size (broadcast down the \
                         partitions)",
                        a.describe(),
                        b.describe()
                    ),
                ))
            }
        }
        (Operand::Tensor(a), Operand::Scalar(_)) => {
            on_chip(py, "x", a)?;
            scalar(a, y, false)
        }
        (Operand::Scalar(_), Operand::Tensor(b)) => {
            on_chip(py, "y", b)?;
            scalar(b, x, true)
        }
        (Operand::Scalar(a), Operand::Scalar(b)) => {
            Err(NkiError::constraint(py, format!("x = {a} and y = {b} are both numbers; at least one must be a tile")))
        }
    }
}

/// `nl.where(condition, x, y, dtype=None)`: a new SBUF tile holding `x` where
/// `condition` is nonzero and `y` elsewhere; `x` and `y` are tiles of
/// `condition`'s shape or numbers. The result's dtype is `dtype`, else that of
/// the tiles among `x` and `y` (`condition`'s when both are numbers).
pub fn r#where(ctx: &Ctx, condition: &Tensor, x: Operand<'_>, y: Operand<'_>, dtype: Option<Dtype>) -> Result<Tensor> {
    const PY: &str = "nl.where";
    on_chip(PY, "condition", condition)?;
    for (role, operand) in [("x", x), ("y", y)] {
        if let Operand::Tensor(t) = operand {
            on_chip(PY, role, t)?;
            if t.shape() != condition.shape() {
                return Err(NkiError::shape(
                    PY,
                    format!("{role} {} must have the shape of condition {} (or be a number)", t.describe(), condition.describe()),
                ));
            }
        }
    }
    let branches: Vec<&Tensor> = [x.tensor(), y.tensor()].into_iter().flatten().collect();
    let out = dtype.unwrap_or_else(|| if branches.is_empty() { condition.dtype() } else { result_dtype(&branches) });
    let dst = result_tile(ctx, "where", condition, out)?;
    match y {
        Operand::Tensor(t) => nisa::tensor_copy(ctx, &dst, t, EngineOpts::default())?,
        Operand::Scalar(v) => nisa::memset(ctx, &dst, v, EngineOpts::default())?,
    }
    let mask = result_tile(ctx, "where_mask", condition, Dtype::U8)?;
    nisa::tensor_scalar(ctx, &mask, condition, NlOp::NotEqual, Operand::Scalar(0.0), TensorScalarOpts::default())?;
    let cast;
    let src = match x {
        Operand::Tensor(t) if t.dtype() != out => {
            cast = result_tile(ctx, "where_x", t, out)?;
            nisa::tensor_copy(ctx, &cast, t, EngineOpts::default())?;
            Operand::Tensor(&cast)
        }
        other => other,
    };
    nisa::tensor_copy_predicated(ctx, &dst, src, &mask, CopyPredicatedOpts::default())?;
    Ok(dst)
}

macro_rules! unary_fns {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("`nl.", stringify!($name), "(x, dtype=None)`: a new SBUF tile of `", stringify!($name), "` applied to each element of `x` (`nisa.activation`).")]
        pub fn $name(ctx: &Ctx, x: &Tensor, dtype: Option<Dtype>) -> Result<Tensor> {
            unary(ctx, &NlOp::$op.to_string(), NlOp::$op, x, dtype)
        }
    )*};
}

macro_rules! binary_fns {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("`nl.", stringify!($name), "(x, y, dtype=None)`: a new SBUF tile of `", stringify!($name), "` applied to each pair of elements of the tiles or numbers `x` and `y`.")]
        pub fn $name(ctx: &Ctx, x: Operand<'_>, y: Operand<'_>, dtype: Option<Dtype>) -> Result<Tensor> {
            binary(ctx, &NlOp::$op.to_string(), NlOp::$op, x, y, dtype)
        }
    )*};
}

unary_fns! {
    exp => Exp, log => Log, copy => Copy, reciprocal => Reciprocal, sqrt => Sqrt, rsqrt => Rsqrt,
    square => Square, abs => Abs, negative => Negative, tanh => Tanh, sigmoid => Sigmoid, relu => Relu,
    silu => Silu, gelu => Gelu, gelu_apprx_tanh => GeluApprxTanh, gelu_apprx_sigmoid => GeluApprxSigmoid,
    erf => Erf, sin => Sin, cos => Cos, arctan => Arctan, softplus => Softplus, mish => Mish, sign => Sign,
    ceil => Ceil, floor => Floor, trunc => Trunc, tan => Tan, erf_dx => ErfDx, gelu_dx => GeluDx,
    gelu_apprx_sigmoid_dx => GeluApprxSigmoidDx, silu_dx => SiluDx, logical_not => LogicalNot, invert => Invert,
}

binary_fns! {
    add => Add, subtract => Subtract, multiply => Multiply, divide => Divide, maximum => Maximum,
    minimum => Minimum, power => Power, less => Less, less_equal => LessEqual, greater => Greater,
    greater_equal => GreaterEqual, equal => Equal, not_equal => NotEqual, logical_and => LogicalAnd,
    logical_or => LogicalOr, logical_xor => LogicalXor, abs_max => AbsMax, abs_min => AbsMin, fmod => Fmod,
    r#mod => Mod, bitwise_and => BitwiseAnd, bitwise_or => BitwiseOr, bitwise_xor => BitwiseXor,
    left_shift => LeftShift, right_shift => RightShift,
}
