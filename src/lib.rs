//! nki-rs: write AWS Trainium NKI kernels in Rust.
//!
//! `#[nki_kernel]` turns an annotated Rust function into two artifacts from one
//! source: the kernel's NKI 2.x Python source (`name::NKI_SOURCE`, produced while
//! the crate compiles) and a CPU emulation (`fn name(ctx, ...)`) with the
//! hardware's numerics. See the README for the DSL and the precision model.
//!
//! This facade re-exports [`nki_core`] (tensors, the `nl` / `nisa` / `ncc`
//! vocabulary, the emulator), the macros, and [`attention`].

extern crate self as nki;

pub use nki_attention as attention;
pub use nki_core::*;
pub use nki_macros::{nki_helper, nki_kernel};

#[path = "../examples/kernels/mod.rs"]
pub mod examples;

/// Everything a kernel file usually needs.
pub mod prelude {
    pub use crate::{Ctx, Dtype, Launch, Precision, Tensor, ncc, nisa, nki_helper, nki_kernel, nl, s};
}

/// Every kernel this crate and [`attention`] register, for `nki emit`.
pub fn registry() -> Vec<&'static emit::FunctionInfo> {
    let mut all = examples::KERNELS.to_vec();
    all.extend_from_slice(attention::KERNELS);
    all
}
