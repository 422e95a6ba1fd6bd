//! `nl.shared_constant`: a shared-HBM tensor holding data known at trace time.

use super::{NdarrayOpts, ndarray};
use crate::emulator::Ctx;
use crate::{Buffer, Dtype, NkiError, Result, Tensor};

/// Constant data: a shape and its row-major values (the literal the kernel wrote).
#[derive(Clone, Copy, Debug)]
pub struct Constant<'a> {
    /// The dims of the literal (`[1]` for a single number).
    pub shape: &'a [usize],
    /// The numbers, row-major.
    pub values: &'a [f64],
}

/// `nl.shared_constant(constant)`: a float32 shared-HBM tensor of the
/// constant's shape holding its values (rounded to float32). Like any shared
/// tensor, the programs of one rank get the same one.
pub fn shared_constant(ctx: &Ctx, constant: Constant<'_>) -> Result<Tensor> {
    const OP: &str = "nl.shared_constant";
    let numel = crate::tensor::checked_numel(constant.shape).map_err(|e| NkiError::shape(OP, e.message))?;
    if numel != constant.values.len() || constant.shape.is_empty() {
        return Err(NkiError::shape(
            OP,
            format!("constant of shape {:?} needs {numel} values, got {}", constant.shape, constant.values.len()),
        ));
    }
    let dims: Vec<i64> = constant.shape.iter().map(|&d| i64::try_from(d).unwrap_or(i64::MAX)).collect();
    let opts = NdarrayOpts { buffer: Some(Buffer::SharedHbm), var: Some("constant"), ..Default::default() };
    let t = ndarray(ctx, &dims, Dtype::F32, opts).map_err(|e| e.in_op(OP))?;
    let values: Vec<f32> = constant.values.iter().map(|&v| v as f32).collect();
    t.fill_from_f32(&values).map_err(|e| e.in_op(OP))?;
    Ok(t)
}
