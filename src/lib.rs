#![doc = include_str!("../README.md")]
//!
//! This facade crate re-exports [`nki_core`] (tensors, the `nl` / `nisa` / `ncc`
//! vocabulary, the emulator), the macros, and [`attention`].

extern crate self as nki;

pub use nki_attention as attention;
pub use nki_core::*;

#[path = "../examples/kernels/mod.rs"]
pub mod examples;

/// Every kernel this crate and [`attention`] register, for `nki emit`.
pub fn registry() -> Vec<&'static emit::FunctionInfo> {
    let mut all = examples::KERNELS.to_vec();
    all.extend_from_slice(attention::KERNELS);
    all
}
