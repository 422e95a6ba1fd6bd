//! How large a list or tuple a kernel may build at trace time. The macro refuses
//! larger literals and `[x; n]` repeats whose length it knows; the emulator
//! refuses a `[x; n]` whose length is only known at run time, before allocating.
//! Real kernels build lists of a few dozen elements (per-tile bookkeeping), so the
//! bound only stops a runaway length from exhausting memory.

/// The most elements one list, tuple or `[x; n]` may hold.
pub const MAX_LIST_ELEMENTS: usize = 4096;
