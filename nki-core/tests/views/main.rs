//! Tensor views: indexing, byte views, indirect views, reorders, select patterns
//! and splits.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

pub mod bytes;
#[path = "../common/mod.rs"]
mod common;
pub mod helpers;
pub mod indexing;
pub mod indirect;
pub mod reorder;
pub mod select_pattern;
pub mod split;
