//! The emitted NKI package: its checked-in snapshots and its conformance with the
//! official API signatures.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

pub mod api;
#[path = "../common/mod.rs"]
mod common;
pub mod snapshots;
