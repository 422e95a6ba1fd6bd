//! Attention kernels written in the nki-rs DSL.

extern crate nki_core as nki;

use nki::emit::FunctionInfo;

/// The kernels this crate registers.
pub static KERNELS: &[&FunctionInfo] = &[];
