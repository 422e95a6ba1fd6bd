//! The `#[nki_kernel]` DSL: each construct emulated against float64 references and
//! its emitted NKI run under the NumPy executor.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

pub mod binding_names;
pub mod bundle_values;
pub mod byte_views;
pub mod collectives;
#[path = "../common/mod.rs"]
mod common;
pub mod cross_module;
pub mod dma_compute;
pub mod dtypes;
pub mod enums;
pub mod gather;
pub mod helpers;
pub mod indirect;
pub mod isa_compute;
pub mod kernel_calls;
pub mod loops;
pub mod mx;
pub mod nl_language;
pub mod nl_tiles;
pub mod psum_capacity;
pub mod random;
pub mod sendrecv;
pub mod shared_constant;
pub mod split_views;
pub mod spread;
pub mod sync;
pub mod unwritten;
pub mod vector_select;
pub mod views;
pub mod write_races;
