//! What a register (`nisa.VirtualRegister`) may not do, in the words every layer
//! reports it with. A register holds a run-time value: tracing a kernel cannot
//! read it, and the index of a device loop (`nl.dynamic_range`, `nl.fori_loop`)
//! is one. The macro refuses each of these uses at compile time, and the NumPy
//! executor with the same text when an NKI kernel written by hand does it.

/// A register compared, or tested by a trace-time `if` or `assert`.
pub const TESTED: &str = "a register holds a run-time value (a device loop's index is a register), which `if`, `assert` and comparisons cannot read while the kernel is traced: peel that iteration out of the loop, or test on the device (nisa.register_store the register into a tile and compute with tiles)";

/// A register in arithmetic (`i * 128 + 1`).
pub const ARITHMETIC: &str = "a register holds a run-time value (a device loop's index is a register), and NKI has no arithmetic on registers: keep the value in an SBUF tile advanced with nisa.tensor_scalar and pass that tile as `scalar_offset`, or let `.ap(pattern, scalar_offset=i, indirect_dim=d)` scale the index by dim d's step";

/// A register where a trace-time integer belongs: a shape, an immediate, a
/// tensor or list index, a slice bound or `nl.ds` start, a trace-time range.
pub const TRACE_TIME: &str = "a register holds a run-time value (a device loop's index is a register), but a shape, an immediate, an index, a slice bound or a trace-time range is fixed when the kernel is traced: address with it through `.ap(pattern, scalar_offset=i, indirect_dim=d)`, or nisa.register_store it into a tile";

/// A write (`register_move`, `register_load`) to the index of `nl.dynamic_range`.
pub const FROZEN: &str = "the index of nl.dynamic_range is frozen: nisa.register_move and nisa.register_load cannot write it (copy it into a register of your own with nisa.register_move)";

/// `.ap()` given both dynamic offsets.
pub const OFFSETS_EXCLUSIVE: &str = "`scalar_offset` and `vector_offset` of `.ap()` are mutually exclusive (an access pattern takes one dynamic offset): add the scalar to every offset on the device (nisa.tensor_scalar on the index tile) and pass `vector_offset` alone";
