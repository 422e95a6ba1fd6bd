//! Support for the code `#[nki_kernel]` generates: trace-time arithmetic with
//! Python semantics (floor division, errors instead of panics), view helpers
//! taking the DSL's `i64`s, and error locations. Not a public API.

use crate::language::list_bounds::MAX_LIST_ELEMENTS;
use crate::{Ctx, Dtype, ErrorKind, NkiError, Outputs, Result, Tensor};
use std::fmt;

/// Attaches the kernel source location of a failing call.
#[inline]
pub fn at<T>(r: Result<T>, file: &'static str, line: u32) -> Result<T> {
    r.map_err(|e| e.at(file, line))
}

/// A called function's result seen as the type its `let` declares: the value
/// itself, or a kernel's [`Outputs`] unpacked into one tensor or a tuple of them
/// (what Python's `a, b = kernel(...)` does).
pub trait FromReturned<S>: Sized {
    /// Converts, failing when the number of outputs differs.
    fn from_returned(s: S) -> Result<Self>;
}

impl<T> FromReturned<T> for T {
    fn from_returned(s: T) -> Result<T> {
        Ok(s)
    }
}

/// A value the macro cannot type statically (a helper's result, say) passed to
/// another kernel or helper: converted to the callee's parameter type, tensors by
/// reference and plain values by copy, as a typed argument would be.
pub trait AsArg<'a, T> {
    /// The argument for a parameter of type `T`.
    fn as_arg(&'a self) -> T;
}

impl<'a> AsArg<'a, &'a Tensor> for Tensor {
    fn as_arg(&'a self) -> &'a Tensor {
        self
    }
}

impl<'a> AsArg<'a, Option<&'a Tensor>> for Option<Tensor> {
    fn as_arg(&'a self) -> Option<&'a Tensor> {
        self.as_ref()
    }
}

impl<'a> AsArg<'a, &'a str> for String {
    fn as_arg(&'a self) -> &'a str {
        self
    }
}

impl<T: Clone> AsArg<'_, T> for T {
    fn as_arg(&self) -> T {
        self.clone()
    }
}

/// A register passed to another kernel or helper: only a parameter declared
/// `Register` takes it (a trace-time parameter cannot hold a run-time value).
#[diagnostic::on_unimplemented(
    message = "a register holds a run-time value, but this parameter is `{T}`, fixed when the kernel is traced; only a parameter declared `Register` takes a register",
    label = "a register (a device loop's index is one)"
)]
pub trait RegisterArg<T> {
    /// The argument for a parameter of type `T`.
    fn register_arg(&self) -> T;
}

impl RegisterArg<crate::isa::Register> for crate::isa::Register {
    fn register_arg(&self) -> crate::isa::Register {
        self.clone()
    }
}

impl RegisterArg<Option<crate::isa::Register>> for crate::isa::Register {
    fn register_arg(&self) -> Option<crate::isa::Register> {
        Some(self.clone())
    }
}

fn outputs<const N: usize>(o: Outputs) -> Result<[Tensor; N]> {
    let n = o.len();
    o.into_vec().try_into().map_err(|_| NkiError::new(ErrorKind::Shape, format!("the callee returned {n} outputs, the `let` unpacks {N}")))
}

impl FromReturned<Outputs> for Tensor {
    fn from_returned(o: Outputs) -> Result<Tensor> {
        let [t] = outputs::<1>(o)?;
        Ok(t)
    }
}

macro_rules! tuple_from_outputs {
    ($n:literal: $($t:ident),+) => {
        impl FromReturned<Outputs> for ($(tuple_from_outputs!(@ty $t),)+) {
            fn from_returned(o: Outputs) -> Result<Self> {
                let [$($t),+] = outputs::<$n>(o)?;
                Ok(($($t,)+))
            }
        }
    };
    (@ty $t:ident) => { Tensor };
}
tuple_from_outputs!(2: a, b);
tuple_from_outputs!(3: a, b, c);
tuple_from_outputs!(4: a, b, c, d);

/// See [`FromReturned`].
pub fn returned<T: FromReturned<S>, S>(s: S) -> Result<T> {
    T::from_returned(s)
}

fn arith(msg: &str) -> NkiError {
    NkiError::new(ErrorKind::Arithmetic, msg)
}

/// Checked `a + b`.
pub fn add(a: i64, b: i64) -> Result<i64> {
    a.checked_add(b).ok_or_else(|| arith("integer overflow in +"))
}

/// Checked `a - b`.
pub fn sub(a: i64, b: i64) -> Result<i64> {
    a.checked_sub(b).ok_or_else(|| arith("integer overflow in -"))
}

/// Checked `a * b`.
pub fn mul(a: i64, b: i64) -> Result<i64> {
    a.checked_mul(b).ok_or_else(|| arith("integer overflow in *"))
}

/// Python `a // b` (rounds toward negative infinity).
pub fn floordiv(a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(arith("integer division by zero"));
    }
    let q = a.checked_div(b).ok_or_else(|| arith("integer overflow in //"))?;
    Ok(if (a % b != 0) && ((a < 0) != (b < 0)) { q - 1 } else { q })
}

/// Python `a << b`, refused past `i64`.
pub fn shl(a: i64, b: i64) -> Result<i64> {
    if b < 0 {
        return Err(arith("negative shift count in <<"));
    }
    let r = u32::try_from(b).ok().filter(|&b| b < 64).and_then(|b| a.checked_shl(b));
    match r {
        _ if a == 0 => Ok(0),
        Some(r) if r >> b == a => Ok(r),
        _ => Err(arith("integer overflow in <<")),
    }
}

/// Python `a >> b` (rounds toward negative infinity).
pub fn shr(a: i64, b: i64) -> Result<i64> {
    if b < 0 {
        return Err(arith("negative shift count in >>"));
    }
    Ok(a >> b.min(63))
}

/// Python `a % b` (takes the sign of `b`).
pub fn floormod(a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(arith("integer modulo by zero"));
    }
    // `checked_rem` only fails for `i64::MIN % -1`, whose remainder is 0. A nonzero
    // remainder whose sign differs from `b` moves into `b`'s range; adding values of
    // opposite signs cannot overflow.
    let r = a.checked_rem(b).unwrap_or(0);
    Ok(if r != 0 && (r < 0) != (b < 0) { r + b } else { r })
}

/// Python `a / b` on floats.
pub fn fdiv(a: f64, b: f64) -> Result<f64> {
    if b == 0.0 {
        return Err(arith("float division by zero"));
    }
    Ok(a / b)
}

/// Python `a % b` on floats.
pub fn fmod(a: f64, b: f64) -> Result<f64> {
    if b == 0.0 {
        return Err(arith("float modulo by zero"));
    }
    Ok(a - b * (a / b).floor())
}

/// Python `a ** b` on integers (`b >= 0`).
pub fn pow(a: i64, b: i64) -> Result<i64> {
    let e = u32::try_from(b).map_err(|_| arith("negative or huge integer exponent"))?;
    a.checked_pow(e).ok_or_else(|| arith("integer overflow in **"))
}

/// `ceil(a / b)`: the floor quotient, plus one when the division is inexact.
pub fn div_ceil(a: i64, b: i64) -> Result<i64> {
    let q = floordiv(a, b)?;
    if floormod(a, b)? == 0 { Ok(q) } else { add(q, 1) }
}

/// Compound assignment (`x += y`, ...) with Python semantics for either number type.
pub trait Compound<Rhs>: Sized {
    /// `self + rhs`.
    fn add(self, rhs: Rhs) -> Result<Self>;
    /// `self - rhs`.
    fn sub(self, rhs: Rhs) -> Result<Self>;
    /// `self * rhs`.
    fn mul(self, rhs: Rhs) -> Result<Self>;
    /// `self // rhs` (integers) or `self / rhs` (floats).
    fn div(self, rhs: Rhs) -> Result<Self>;
    /// `self % rhs`.
    fn rem(self, rhs: Rhs) -> Result<Self>;
}

impl Compound<i64> for i64 {
    fn add(self, rhs: i64) -> Result<i64> {
        add(self, rhs)
    }
    fn sub(self, rhs: i64) -> Result<i64> {
        sub(self, rhs)
    }
    fn mul(self, rhs: i64) -> Result<i64> {
        mul(self, rhs)
    }
    fn div(self, rhs: i64) -> Result<i64> {
        floordiv(self, rhs)
    }
    fn rem(self, rhs: i64) -> Result<i64> {
        floormod(self, rhs)
    }
}

macro_rules! float_compound {
    ($rhs:ty) => {
        impl Compound<$rhs> for f64 {
            fn add(self, rhs: $rhs) -> Result<f64> {
                Ok(self + rhs as f64)
            }
            fn sub(self, rhs: $rhs) -> Result<f64> {
                Ok(self - rhs as f64)
            }
            fn mul(self, rhs: $rhs) -> Result<f64> {
                Ok(self * rhs as f64)
            }
            fn div(self, rhs: $rhs) -> Result<f64> {
                fdiv(self, rhs as f64)
            }
            fn rem(self, rhs: $rhs) -> Result<f64> {
                fmod(self, rhs as f64)
            }
        }
    };
}
float_compound!(f64);
float_compound!(i64);

/// Python `+`, `-` and `*` where an operand is another function's result,
/// whose type only the compiler sees: two ints stay a checked int, a float
/// on either side makes a float.
pub trait PyArith<Rhs> {
    /// `int` for two ints, else `float`.
    type Output;
    /// `self + rhs`.
    fn py_add(self, rhs: Rhs) -> Result<Self::Output>;
    /// `self - rhs`.
    fn py_sub(self, rhs: Rhs) -> Result<Self::Output>;
    /// `self * rhs`.
    fn py_mul(self, rhs: Rhs) -> Result<Self::Output>;
}

impl<R, T: Compound<R>> PyArith<R> for T {
    type Output = T;
    fn py_add(self, rhs: R) -> Result<T> {
        Compound::add(self, rhs)
    }
    fn py_sub(self, rhs: R) -> Result<T> {
        Compound::sub(self, rhs)
    }
    fn py_mul(self, rhs: R) -> Result<T> {
        Compound::mul(self, rhs)
    }
}

/// An int and a float: the int as a float.
impl PyArith<f64> for i64 {
    type Output = f64;
    fn py_add(self, rhs: f64) -> Result<f64> {
        Compound::add(self as f64, rhs)
    }
    fn py_sub(self, rhs: f64) -> Result<f64> {
        Compound::sub(self as f64, rhs)
    }
    fn py_mul(self, rhs: f64) -> Result<f64> {
        Compound::mul(self as f64, rhs)
    }
}

/// The check at the top of every kernel loop iteration: a program of a launch
/// that failed or ran past its deadline stops here even when the loop runs no op.
#[inline]
pub fn iteration(ctx: &Ctx) -> Result<()> {
    ctx.loop_iteration()
}

/// The integers of a kernel's range, in order: `left` more values from `next`, `delta` apart.
pub struct Steps {
    next: i64,
    delta: i64,
    left: u64,
}

impl Iterator for Steps {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let v = self.next;
        // Past the last value the sum may leave i64; it is never read.
        self.next = self.next.wrapping_add(self.delta);
        Some(v)
    }
}

/// How many values `range(start, stop, step)` holds for a positive `step`.
fn steps_len(start: i64, stop: i64, step: i64) -> Result<u64> {
    if step <= 0 {
        return Err(arith("a kernel loop's step must be positive"));
    }
    let span = i128::from(stop) - i128::from(start);
    Ok(if span > 0 { ((span - 1) / i128::from(step) + 1) as u64 } else { 0 })
}

/// Python `range(start, stop, step)` for a positive step.
pub fn range(start: i64, stop: i64, step: i64) -> Result<Steps> {
    Ok(Steps { next: start, delta: step, left: steps_len(start, stop, step)? })
}

/// Rust's `(start..stop).rev().step_by(step)`, Python's
/// `range(stop - 1, start - 1, -step)`: from `stop - 1` down to `start`.
pub fn range_rev(start: i64, stop: i64, step: i64) -> Result<Steps> {
    let left = steps_len(start, stop, step)?;
    Ok(Steps { next: stop.wrapping_sub(1), delta: -step, left })
}

/// The range of a list built as `(start..stop).map(..).collect()` (Python's
/// `[x for i in range(start, stop, step)]`; `rev`: counting down as
/// [`range_rev`]), refused past the most elements a kernel's list may hold
/// before any element is built.
pub fn list_range(start: i64, stop: i64, step: i64, rev: bool) -> Result<Steps> {
    let iter = if rev { range_rev(start, stop, step)? } else { range(start, stop, step)? };
    if iter.left > MAX_LIST_ELEMENTS as u64 {
        let n = iter.left;
        return Err(arith(&format!("a list of {n} elements is longer than the {MAX_LIST_ELEMENTS} elements a kernel's list may hold")));
    }
    Ok(iter)
}

/// Destructures a shape: `let [a, b] = t.shape();`.
pub fn unpack<const N: usize>(shape: Vec<i64>) -> Result<[i64; N]> {
    let n = shape.len();
    shape.try_into().map_err(|_| NkiError::new(ErrorKind::Shape, format!("expected a shape of rank {N}, got rank {n}")))
}

/// `[x; n]` / Python `[x] * n`.
pub fn repeat<T: Clone>(x: T, n: i64) -> Result<Vec<T>> {
    let n = usize::try_from(n).map_err(|_| arith("negative repeat count"))?;
    if n > MAX_LIST_ELEMENTS {
        return Err(arith(&format!("`[x; {n}]` is longer than the {MAX_LIST_ELEMENTS} elements a kernel's list may hold")));
    }
    Ok(vec![x; n])
}

/// `list[i]` with Python's negative indexing.
pub fn get<T: Clone>(items: &[T], i: i64) -> Result<T> {
    let n = items.len() as i64;
    let k = if i < 0 { i + n } else { i };
    usize::try_from(k)
        .ok()
        .and_then(|k| items.get(k).cloned())
        .ok_or_else(|| NkiError::new(ErrorKind::Bounds, format!("index {i} is out of range for {n} items")))
}

/// `t.shape` as Python ints.
pub fn shape(t: &Tensor) -> Vec<i64> {
    t.shape().iter().map(|&d| d as i64).collect()
}

fn dim(d: i64, what: &str) -> Result<usize> {
    usize::try_from(d).map_err(|_| NkiError::new(ErrorKind::Shape, format!("{what} must be non-negative, got {d}")))
}

/// `t.ap(pattern=..., offset=..., scalar_offset=..., indirect_dim=..., dtype=...)`.
pub fn ap(
    t: &Tensor,
    pattern: &[[i64; 2]],
    offset: Option<i64>,
    dynamic: Option<i64>,
    indirect_dim: i64,
    dtype: Option<Dtype>,
) -> Result<Tensor> {
    as_dtype(t, dtype)?.ap(pattern, offset, dynamic, dim(indirect_dim, "indirect_dim")?).map_err(|e| e.in_op("ap"))
}

/// `t.ap(pattern=..., offset=..., vector_offset=..., indirect_dim=..., dtype=...)`.
pub fn ap_vector_offset(
    t: &Tensor,
    pattern: &[[i64; 2]],
    offset: Option<i64>,
    vector: &Tensor,
    indirect_dim: i64,
    dtype: Option<Dtype>,
) -> Result<Tensor> {
    as_dtype(t, dtype)?.ap_vector_offset(pattern, offset, vector, dim(indirect_dim, "indirect_dim")?).map_err(|e| e.in_op("ap"))
}

/// The view `.ap(dtype=)` patterns count in: `t` reinterpreted as `dtype` when given.
fn as_dtype(t: &Tensor, dtype: Option<Dtype>) -> Result<Tensor> {
    dtype.map_or_else(|| Ok(t.clone()), |d| t.reinterpreted("ap", d))
}

/// `t.indirect(index, num_elem)`, on the generations its spec row lists.
pub fn indirect(ctx: &Ctx, t: &Tensor, index: &Tensor, num_elem: Option<i64>) -> Result<Tensor> {
    let row = nki_spec::ops().find(|o| o.official_name() == "nki.language.NkiTensor.indirect");
    if let Some(row) = row.filter(|r| !r.generations.contains(&ctx.generation())) {
        let gens: Vec<String> = row.generations.iter().map(ToString::to_string).collect();
        return Err(NkiError::constraint(
            "indirect",
            format!("tensor indirection exists on {} only; the launch targets {}", gens.join(", "), ctx.generation()),
        ));
    }
    let n =
        num_elem.map(|n| usize::try_from(n).map_err(|_| NkiError::argument("num_elem", n.to_string(), "a positive count"))).transpose()?;
    t.indirect(index, n)
}

/// `t.view(dtype)`.
pub fn view(t: &Tensor, dtype: Dtype) -> Result<Tensor> {
    t.view(dtype)
}

/// `t.reshape(shape)`.
pub fn reshape(t: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let dims = shape.iter().map(|&d| dim(d, "a reshape dim")).collect::<Result<Vec<_>>>()?;
    t.reshape(&dims)
}

/// `t.broadcast(dim, size)`.
pub fn broadcast(t: &Tensor, d: i64, size: i64) -> Result<Tensor> {
    t.broadcast(dim(d, "dim")?, dim(size, "size")?)
}

/// `t.expand_dim(dim)`.
pub fn expand_dim(t: &Tensor, d: i64) -> Result<Tensor> {
    t.expand_dim(dim(d, "dim")?)
}

/// `t.select(dim, index)`.
pub fn select(t: &Tensor, d: i64, index: i64) -> Result<Tensor> {
    t.select(dim(d, "dim")?, index)
}

/// `t.slice(dim, start, end, step)`.
pub fn slice(t: &Tensor, d: i64, start: i64, end: i64, step: i64) -> Result<Tensor> {
    t.slice(dim(d, "dim")?, start, end, step)
}

/// `t.permute(dims)`.
pub fn permute(t: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let dims = dims.iter().map(|&d| dim(d, "a permute dim")).collect::<Result<Vec<_>>>()?;
    t.permute(&dims)
}

/// `t.squeeze_dim(dim)`.
pub fn squeeze_dim(t: &Tensor, d: i64) -> Result<Tensor> {
    t.squeeze_dim(dim(d, "dim")?)
}

/// `t.flatten_dims(start_dim, end_dim)`.
pub fn flatten_dims(t: &Tensor, start: i64, end: i64) -> Result<Tensor> {
    t.flatten_dims(dim(start, "start_dim")?, dim(end, "end_dim")?)
}

/// `t.reshape_dim(dim, shape)`.
pub fn reshape_dim(t: &Tensor, d: i64, shape: &[i64]) -> Result<Tensor> {
    t.reshape_dim(dim(d, "dim")?, shape)
}

/// `t.vector_select(dim, vector_offset)`.
pub fn vector_select(t: &Tensor, d: i64, vector_offset: &Tensor) -> Result<Tensor> {
    t.vector_select(dim(d, "dim")?, vector_offset)
}

/// `t.rearrange(src_pattern, dst_pattern, fixed_sizes)`.
pub fn rearrange(t: &Tensor, src: &crate::tensor::Pattern<'_>, dst: &crate::tensor::Pattern<'_>, fixed: &[(&str, i64)]) -> Result<Tensor> {
    t.rearrange(src, dst, fixed)
}

/// The check of a kernel's tensor parameter against its dtype contract
/// (`#[dtypes(...)]` or the float default): `t`'s dtype must be one of
/// `accepted` (`nl` names); the error names the kernel, the parameter, its
/// dtype and the accepted ones.
pub fn check_dtype(t: &Tensor, kernel: &str, param: &str, accepted: &[&str]) -> Result<()> {
    crate::emit::check_dtype(kernel, param, t.dtype(), accepted)
}

/// The check of a scalar parameter declared `#[range(...)]`.
pub fn check_range(value: f64, kernel: &str, param: &str, bounds: &[crate::spec::contract::Bound]) -> Result<()> {
    crate::emit::check_range(kernel, param, value, bounds)
}

/// A failed kernel `assert!`.
pub fn assertion(message: String, file: &'static str, line: u32) -> NkiError {
    NkiError::new(ErrorKind::Assertion, message).in_op("assert").at(file, line)
}

/// Formats values the way the emitted Python's f-strings do.
pub struct Show<'a, T: ?Sized>(pub &'a T);

macro_rules! show_display {
    ($($t:ty),*) => {$(
        impl fmt::Display for Show<'_, $t> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )*};
}
show_display!(i64, String, Dtype);

impl fmt::Display for Show<'_, f64> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for Show<'_, bool> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self.0 { "True" } else { "False" })
    }
}

impl fmt::Display for Show<'_, Vec<i64>> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        if parts.len() == 1 { write!(f, "({},)", parts[0]) } else { write!(f, "({})", parts.join(", ")) }
    }
}

impl fmt::Display for Show<'_, Tensor> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.describe())
    }
}

impl<T> fmt::Display for Show<'_, Option<T>>
where
    for<'b> Show<'b, T>: fmt::Display,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{}", Show(v)),
            None => f.write_str("None"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_integer_semantics() {
        assert_eq!(floordiv(-7, 2).unwrap(), -4);
        assert_eq!(floormod(-7, 2).unwrap(), 1);
        assert_eq!(floordiv(7, -2).unwrap(), -4);
        assert_eq!(floormod(7, -2).unwrap(), -1);
        assert!(floordiv(1, 0).is_err());
        assert_eq!(div_ceil(1025, 512).unwrap(), 3);
        assert_eq!(range(0, 10, 4).unwrap().collect::<Vec<_>>(), vec![0, 4, 8]);
        assert_eq!(range(5, 2, 1).unwrap().count(), 0);
        assert_eq!(get(&[1, 2, 3], -1).unwrap(), 3);
        assert_eq!(Show(&1.0f64).to_string(), "1.0");
        assert_eq!(Show(&Some(3i64)).to_string(), "3");
        assert_eq!(Show(&vec![4i64]).to_string(), "(4,)");
    }

    /// Python's `//`, `%` and ceiling division computed in i128, where nothing overflows.
    fn python_i128(a: i64, b: i64) -> (i128, i128, i128) {
        let (a, b) = (i128::from(a), i128::from(b));
        let mut q = a / b;
        if a % b != 0 && (a < 0) != (b < 0) {
            q -= 1;
        }
        let ceil = if a - q * b == 0 { q } else { q + 1 };
        (q, a - q * b, ceil)
    }

    #[test]
    fn integer_division_at_the_extremes_is_exact_or_an_error() {
        let values = [i64::MIN, i64::MIN + 1, -7, -3, -2, -1, 1, 2, 3, 7, i64::MAX - 1, i64::MAX];
        for a in values.into_iter().chain([0]) {
            for b in values {
                let (q, r, c) = python_i128(a, b);
                let fits = |v: i128| i64::try_from(v).ok();
                assert_eq!(floordiv(a, b).ok(), fits(q), "{a} // {b}");
                assert_eq!(floormod(a, b).ok(), fits(r), "{a} % {b}");
                assert_eq!(div_ceil(a, b).ok(), fits(c), "ceil({a} / {b})");
            }
            assert!(floormod(a, 0).is_err() && div_ceil(a, 0).is_err());
        }
    }

    #[test]
    fn a_repeat_longer_than_a_kernel_list_is_an_error_before_allocating() {
        assert_eq!(repeat(0i64, MAX_LIST_ELEMENTS as i64).unwrap().len(), MAX_LIST_ELEMENTS);
        let e = repeat(0i64, 1 << 40).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Arithmetic);
        assert!(e.message.contains("1099511627776") && e.message.contains("4096"), "{e}");
        assert!(repeat(0i64, -1).is_err());
    }
}
