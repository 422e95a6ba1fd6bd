//! Hardware limits for compile-time checks: the spec's table, which the emulator uses too.

pub use nki_spec::hw::{Generation, HwLimits};
