//! The emulator: runs kernels on CPU as an SPMD grid of programs per rank and a ring
//! of ranks, with the hardware's numerics and run-time checks of every op's limits.
//!
//! Each program is a thread with its own [`Ctx`]. Programs of one rank share
//! `nl.shared_hbm` tensors; ranks talk only through `nki.collectives`. Spare
//! cores split large instructions ([`helpers`]).

mod ctx;
pub(crate) mod helpers;
mod launch;
pub mod memory;
mod precision;
pub(crate) mod world;

pub use crate::tensor::POISON_TILES_ENV;
pub use ctx::Ctx;
pub use launch::{Launch, RunReport, STRICT_UNINIT_ENV};
pub use memory::{Allocator, MemoryReport};
pub use precision::Precision;
