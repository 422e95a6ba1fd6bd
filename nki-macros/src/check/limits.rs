//! Hardware limits for compile-time checks: the same table the emulator uses.

#[path = "../../../nki-core/src/hw/mod.rs"]
#[allow(dead_code)]
mod hw;

pub use hw::{Generation, HwLimits};
