//! The Python helper that checks what a kernel is given against its
//! parameters' contract.
//!
//! A kernel asserts, before its body, that each enum parameter holds a member
//! of its class and each tensor parameter one of the dtypes it takes. Kernels
//! with the library's drop-in signatures share most of their parameters, so
//! the checks live once per package, in this helper, and each kernel passes it
//! a table of its parameters (`#[nki_kernel]` emits the call and lists
//! [`CHECK_CONTRACT`] among the kernel's dependencies, which puts the module
//! in the package).
//!
//! The helper is plain Python run when the kernel is traced: a loop over a
//! tuple, tuple unpacking, `isinstance` and asserts with f-strings, as the NKI
//! library's own validation helpers are (`kernel_assert`, and `reduce`'s
//! asserted loop over a list, in its `core/utils`).

use super::{FunctionInfo, FunctionKind};

/// `check_contract(kernel, enums, dtypes)` (`kernel_contract.py`): the Python
/// helper every kernel with enum or dtype contracts calls, in its own module
/// of the package.
pub static CHECK_CONTRACT: FunctionInfo =
    FunctionInfo::item(FunctionKind::Helper, "check_contract", include_str!("kernel_contract.py"), module_path!(), file!());
