//! nki-core: the vocabulary of nki-rs with CPU semantics.
//!
//! * [`dtype`]: NKI element types and exact rounding;
//! * [`tensor`]: tensors and views in HBM, SBUF and PSUM;
//! * [`isa`] (`nisa`), [`language`] (`nl`), [`collectives`] (`ncc`): the NKI API;
//! * [`hw`]: per-generation hardware tables;
//! * [`emulator`]: launches over an LNC grid and a ring of ranks;
//! * [`profile`]: estimated Trainium timelines of emulated launches;
//! * [`emit`]: assembling emitted NKI source into a Python package.

#[doc(hidden)]
#[path = "rt.rs"]
pub mod __rt;
/// The distributed-slice crate `#[nki_kernel]` registers kernels with (see [`emit::KERNELS`]).
#[doc(hidden)]
pub use linkme as __linkme;
pub mod collectives;
pub mod dtype;
pub mod emit;
pub mod emulator;
pub mod error;
/// Hardware tables per NeuronCore generation (the spec's).
pub use nki_spec::hw;
pub mod io;
pub mod isa;
pub mod language;
pub mod numeric;
pub mod profile;
pub mod tensor;
#[cfg(test)]
mod test_rng;

pub use collectives as ncc;
pub use dtype::Dtype;
pub use emulator::{Allocator, Ctx, Launch, Precision};
pub use error::{ErrorKind, NkiError, Origin, Result};
pub use isa as nisa;
pub use language as nl;
#[doc(hidden)]
pub use nki_macros::__nki_import;
pub use nki_macros::{nki_enum, nki_helper, nki_kernel, nki_module, nki_object, nki_params};
/// The vocabulary as data: ops, enums, dtypes, hardware limits.
pub use nki_spec as spec;
pub use tensor::{Buffer, Idx, Outputs, Tensor};

/// Everything a kernel file usually needs.
pub mod prelude {
    pub use crate::{
        Ctx, Dtype, Launch, Outputs, Precision, Tensor, collectives::Groups, ncc, nisa, nki_enum, nki_helper, nki_kernel, nki_module,
        nki_object, nki_params, nl, s,
    };
}
