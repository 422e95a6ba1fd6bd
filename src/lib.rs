#![doc = include_str!("../README.md")]
//!
//! This facade crate re-exports [`nki_core`] (tensors, the `nl` / `nisa` / `ncc`
//! vocabulary, the emulator), the macros, and [`attention`]; [`cli`] is the
//! `nki` command line, which `nki::main!()` makes a crate's own.

extern crate self as nki;

pub use nki_attention as attention;
pub use nki_core::*;

pub mod cli;

pub use emit::registry;
