//! Which element types each tensor parameter of a kernel accepts, read from the
//! kernel's own declaration.
//!
//! The dtypes are declared once, on the kernel's parameters (`#[dtypes(...)]`);
//! the kernel's registration carries them, and its emitted asserts and Rust
//! checks come from them. Each typed API names its kernel in a [`ParamDtypes`]
//! (`cte::DTYPES`, `ring_fwd::DTYPES`, `ring_bwd::DTYPES`, `tkg::DTYPES`), with
//! the typed API's names of parameters the kernel names otherwise (the ring
//! backward's `q` is the kernel's `q_ref`), and checks its inputs against it
//! before a launch, as the `nki run` commands check `.npy` headers before
//! reading them.

use nki::emit::{FunctionInfo, ParamInfo};
use nki::{Dtype, NkiError, Result, Tensor};

/// The dtypes every tensor parameter of one kernel accepts.
#[derive(Clone, Copy, Debug)]
pub struct ParamDtypes {
    /// The kernel's registration.
    pub kernel: &'static FunctionInfo,
    /// `(typed API name, kernel parameter)` for parameters named otherwise.
    pub aliases: &'static [(&'static str, &'static str)],
}

impl ParamDtypes {
    /// The kernel parameter `param` (a typed API name) stands for.
    fn param(&self, param: &str) -> Option<&'static ParamInfo> {
        let name = self.aliases.iter().find(|(a, _)| *a == param).map_or(param, |&(_, p)| p);
        self.kernel.params.iter().find(|p| p.name == name && p.kind == nki::emit::ParamKind::Tensor)
    }

    /// Checks that a tensor of `dtype` may be given as `param`; the error names
    /// `shown` (`param`, or `param[r]` for rank `r`'s), the dtype and the
    /// accepted ones.
    pub fn check_dtype(&self, param: &str, shown: &str, dtype: Dtype) -> Result<()> {
        let p = self
            .param(param)
            .ok_or_else(|| NkiError::argument("param", param, &format!("{} has no tensor parameter of that name", self.kernel.name)))?;
        p.check_dtype(self.kernel.name, dtype).map_err(|_| {
            let rule = nki::spec::contract::either(p.dtypes);
            NkiError::argument(shown, dtype, &format!("{} takes {param} as {rule}", self.kernel.name))
        })
    }

    /// Checks that `t` has a dtype `param` accepts.
    pub fn check(&self, param: &str, t: &Tensor) -> Result<()> {
        self.check_dtype(param, param, t.dtype())
    }

    /// Checks every rank's tensor of `param` (`param[r]` in the error).
    pub fn check_each(&self, param: &str, ts: &[Tensor]) -> Result<()> {
        ts.iter().enumerate().try_for_each(|(r, t)| self.check_dtype(param, &format!("{param}[{r}]"), t.dtype()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: ParamDtypes =
        ParamDtypes { kernel: &crate::ring_bwd::ring_attention_bwd::ring_attention_spmd_bwd::INFO, aliases: &[("q", "q_ref")] };

    #[test]
    fn refusals_name_the_parameter_the_dtype_and_the_declared_ones() {
        let ints = Tensor::from_i64(&[2], &[1, 2], Dtype::I32).unwrap();
        let floats = Tensor::from_f32(&[2], &[1.0, 2.0], Dtype::Bf16).unwrap();
        assert_eq!(
            TABLE.check("q", &ints).unwrap_err().to_string(),
            "invalid q = int32: ring_attention_spmd_bwd takes q as float32, bfloat16 or float16"
        );
        assert_eq!(
            TABLE.check("sinks", &floats).unwrap_err().to_string(),
            "invalid sinks = bfloat16: ring_attention_spmd_bwd takes sinks as float32"
        );
        let e = TABLE.check_each("q", &[floats.clone(), ints.clone()]).unwrap_err();
        assert!(e.to_string().starts_with("invalid q[1] = int32"), "{e}");
        assert!(TABLE.check("q", &floats).is_ok() && TABLE.check("q_segment_ids", &ints).is_ok());
        assert!(TABLE.check("nope", &floats).unwrap_err().to_string().contains("no tensor parameter"));
    }
}
