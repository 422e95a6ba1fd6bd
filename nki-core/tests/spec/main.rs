//! The emulator against the spec tables of `nki-spec`, and every code of the 8-bit
//! float dtypes.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

#[path = "../common/mod.rs"]
mod common;
pub mod correspondence;
pub mod dtype_codes;
