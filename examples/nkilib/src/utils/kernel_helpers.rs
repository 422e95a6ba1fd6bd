//! Helpers the library's kernels share (its `kernel_helpers`): the
//! activation of an `ActFnType` member (optionally of scaled data), the
//! optional clamps of a gated MLP's projections, and the shape asserts of
//! optional tensors.

pub use kernel::*;

/// The helpers.
#[nki::nki_module]
pub mod kernel {
    pub use crate::utils::common_types::ActFnType;
    use nki::prelude::*;

    /// The optional clamps of a gated MLP's gate and up projections (the
    /// library's `gate_clamp_*` and `up_clamp_*` arguments of its MLP and
    /// MoE kernels); the gate is clamped before its activation.
    #[nki_object]
    pub struct ClampLimits {
        /// Upper clamp of the gate projection.
        pub gate_clamp_upper_limit: Option<f64>,
        /// Lower clamp of the gate projection.
        pub gate_clamp_lower_limit: Option<f64>,
        /// Upper clamp of the up projection.
        pub up_clamp_upper_limit: Option<f64>,
        /// Lower clamp of the up projection.
        pub up_clamp_lower_limit: Option<f64>,
    }

    /// Whether any of the clamp limits `c` is given.
    #[nki_helper]
    pub fn any_clamp(c: ClampLimits) -> bool {
        let (gate_upper, gate_lower) = (c.gate_clamp_upper_limit, c.gate_clamp_lower_limit);
        let (up_upper, up_lower) = (c.up_clamp_upper_limit, c.up_clamp_lower_limit);
        gate_upper.is_some() || gate_lower.is_some() || up_upper.is_some() || up_lower.is_some()
    }

    /// Clamps `p` in place to `[lower, upper]` (each bound optional).
    #[nki_helper]
    pub fn clamp(p: Sbuf, upper: Option<f64>, lower: Option<f64>) {
        if let Some(u) = upper {
            nisa::tensor_scalar(p, p, nl::minimum, u);
        }
        if let Some(l) = lower {
            nisa::tensor_scalar(p, p, nl::maximum, l);
        }
    }

    /// `dst = act(data)` for the library's activation enum (`data` in SBUF
    /// or PSUM; computed in fp32, rounded to `dst`'s dtype).
    #[nki_helper]
    pub fn apply_activation(dst: Sbuf, data: Tensor, activation_fn: ActFnType) {
        match activation_fn {
            ActFnType::SiLU => nisa::activation(dst, nl::silu, data),
            ActFnType::GELU => nisa::activation(dst, nl::gelu, data),
            ActFnType::GELU_Tanh_Approx => nisa::activation(dst, nl::gelu_apprx_tanh, data),
            ActFnType::Swish => nisa::activation(dst, nl::gelu_apprx_sigmoid, data),
        }
    }

    /// `dst = act(data · scale)` with a per-partition `scale` (`[P, 1]`
    /// fp32), the dequantization a quantized projection folds into its
    /// activation.
    #[nki_helper]
    pub fn apply_scaled_activation(dst: Sbuf, data: Tensor, activation_fn: ActFnType, scale: Sbuf) {
        match activation_fn {
            ActFnType::SiLU => nisa::activation(dst, nl::silu, data, scale = scale),
            ActFnType::GELU => nisa::activation(dst, nl::gelu, data, scale = scale),
            ActFnType::GELU_Tanh_Approx => nisa::activation(dst, nl::gelu_apprx_tanh, data, scale = scale),
            ActFnType::Swish => nisa::activation(dst, nl::gelu_apprx_sigmoid, data, scale = scale),
        }
    }

    /// Asserts `t` (when given) is `[d0, d1]`; `kernel` names the caller in the message.
    #[nki_helper]
    pub fn check_2d(t: Option<Hbm>, kernel: &str, name: &str, d0: i64, d1: i64) {
        if let Some(v) = t {
            let shape = v.shape();
            assert!(v.ndim() == 2 && shape[0] == d0 && shape[1] == d1, "{kernel}: {name} must be [{d0}, {d1}], got {shape}");
        }
    }

    /// Asserts `t` (when given) is a row of the hidden size, `[1, H]` with `H
    /// = h`; `kernel` names the caller in the message.
    #[nki_helper]
    pub fn check_hidden_row(t: Option<Hbm>, kernel: &str, name: &str, h: i64) {
        if let Some(v) = t {
            let shape = v.shape();
            assert!(v.ndim() == 2 && shape[0] == 1 && shape[1] == h, "{kernel}: {name} must be [1, H] = [1, {h}], got {shape}");
        }
    }

    /// Asserts `t` (when given) is `[d0, d1, d2]`; `kernel` names the caller in the message.
    #[nki_helper]
    pub fn check_3d(t: Option<Hbm>, kernel: &str, name: &str, d0: i64, d1: i64, d2: i64) {
        if let Some(v) = t {
            let shape = v.shape();
            assert!(
                v.ndim() == 3 && shape[0] == d0 && shape[1] == d1 && shape[2] == d2,
                "{kernel}: {name} must be [{d0}, {d1}, {d2}], got {shape}"
            );
        }
    }
}
