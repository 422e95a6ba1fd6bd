//! Which element types each tensor parameter of a kernel accepts.
//!
//! Every kernel declares one [`ParamDtypes`] table next to its typed API
//! (`cte::DTYPES`, `ring_fwd::DTYPES`, `ring_bwd::DTYPES`, `tkg::DTYPES`); the typed API refuses
//! other dtypes with an error naming the parameter, and so does anything that
//! loads tensors for a kernel (the `nki run` command) by checking the same table.

use nki::{Dtype, NkiError, Result, Tensor};

/// Data (queries, keys, values, outputs, gradients, statistics, sink logits): the
/// float dtypes the kernels document. They are loaded into bf16 or fp32 tiles by
/// casting DMAs; an integer tensor there would be read as numbers, not garbage,
/// but it is a caller's mistake, so it is refused.
pub const FLOATS: &[Dtype] = &[Dtype::F32, Dtype::Bf16, Dtype::F16];

/// Positions and offsets read into fp32 tiles by a casting DMA: int32 (the
/// library's tests) or float32 (what ring attention writes).
pub const POSITIONS: &[Dtype] = &[Dtype::I32, Dtype::F32];

/// Logits the kernels read as fp32 columns (ring attention's sinks).
pub const FLOAT32: &[Dtype] = &[Dtype::F32];

/// A length documented as an int32 tensor.
pub const INT32: &[Dtype] = &[Dtype::I32];

/// A visibility mask used as a copy predicate (nonzero: visible).
pub const UINT8: &[Dtype] = &[Dtype::U8];

/// The dtypes every tensor parameter of one kernel accepts.
#[derive(Clone, Copy, Debug)]
pub struct ParamDtypes {
    /// The kernel's name, for messages.
    pub kernel: &'static str,
    /// Each tensor parameter and the dtypes it accepts.
    pub params: &'static [(&'static str, &'static [Dtype])],
}

impl ParamDtypes {
    /// The dtypes `param` accepts, if it is a tensor parameter of the kernel.
    pub fn accepted(&self, param: &str) -> Option<&'static [Dtype]> {
        self.params.iter().find(|(p, _)| *p == param).map(|&(_, d)| d)
    }

    /// Checks that `t` has a dtype `param` accepts; the error names the parameter,
    /// the dtype and the accepted ones.
    pub fn check(&self, param: &str, t: &Tensor) -> Result<()> {
        self.check_named(param, param, t)
    }

    /// Checks every rank's tensor of `param` (`param[r]` in the error).
    pub fn check_each(&self, param: &str, ts: &[Tensor]) -> Result<()> {
        ts.iter().enumerate().try_for_each(|(r, t)| self.check_named(param, &format!("{param}[{r}]"), t))
    }

    fn check_named(&self, param: &str, shown: &str, t: &Tensor) -> Result<()> {
        let accepted = self
            .accepted(param)
            .ok_or_else(|| NkiError::argument("param", param, &format!("{} has no tensor parameter of that name", self.kernel)))?;
        if accepted.contains(&t.dtype()) {
            return Ok(());
        }
        let names: Vec<&str> = accepted.iter().map(|d| d.nl_name()).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        };
        Err(NkiError::argument(shown, t.dtype(), &format!("{} takes {param} as {list}", self.kernel)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: ParamDtypes = ParamDtypes { kernel: "k", params: &[("q", FLOATS), ("len", INT32)] };

    #[test]
    fn refusals_name_the_parameter_the_dtype_and_the_accepted_ones() {
        let ints = Tensor::from_i64(&[2], &[1, 2], Dtype::I32).unwrap();
        let floats = Tensor::from_f32(&[2], &[1.0, 2.0], Dtype::Bf16).unwrap();
        assert_eq!(TABLE.check("q", &ints).unwrap_err().to_string(), "invalid q = int32: k takes q as float32, bfloat16 or float16");
        assert_eq!(TABLE.check("len", &floats).unwrap_err().to_string(), "invalid len = bfloat16: k takes len as int32");
        let e = TABLE.check_each("q", &[floats.clone(), ints.clone()]).unwrap_err();
        assert!(e.to_string().starts_with("invalid q[1] = int32"), "{e}");
        assert!(TABLE.check("q", &floats).is_ok() && TABLE.check("len", &ints).is_ok());
        assert!(TABLE.check("nope", &floats).unwrap_err().to_string().contains("no tensor parameter"));
    }
}
