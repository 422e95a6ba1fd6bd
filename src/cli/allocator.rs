//! The memory allocator of a binary made by `nki::main!()`: mimalloc, told
//! never to return freed memory to the OS.
//!
//! An emulator run allocates the inputs, every tile and output and the matmul
//! kernels' buffers from one thread per LNC program and rank. glibc grows a
//! separate arena per thread in 4 KiB pages: every first touch is a page fault
//! (costly in a virtual machine), growing an arena changes the address space
//! under the other threads, and tearing the arenas down at exit takes
//! milliseconds. mimalloc carves every thread's heap from large segments
//! advised to use transparent huge pages, and memory freed by one thread serves
//! the next allocation of another.
//!
//! By default mimalloc also purges freed memory some time after it is freed
//! (hands it back to the OS), and the next allocation faults it in again. An
//! `nki` command is one run whose memory returns to the OS when the process
//! ends, so [`tune`] turns purging off.
//!
//! Whole `nki run attention-cte` processes on the 2-vCPU benchmark machine
//! (fp32, causal, LNC 2 unless noted): 8 × 2048 × 128 went from 116 to 100 ms
//! on one thread and from 68 to 58 ms with mimalloc instead of glibc; at
//! 2 × 16384 × 128 purging made mimalloc slower than glibc (median 905 against
//! 762 ms) and turning it off brings it level (764 ms).

use libmimalloc_sys::mi_option_t;

/// The allocator `nki::main!()` installs as the binary's global allocator.
pub use mimalloc::MiMalloc as Allocator;

/// mimalloc's `purge_delay` option. The binding does not name it; in
/// mimalloc's `mi_option_e` it is the option just before `use_numa_nodes`,
/// which the binding names.
const PURGE_DELAY: mi_option_t = libmimalloc_sys::mi_option_use_numa_nodes - 1;

/// The `purge_delay` that turns purging off.
const NEVER: std::ffi::c_long = -1;

/// Turns mimalloc's purging off (see the module docs). Call first in `main`.
pub fn tune() {
    // SAFETY: setting an option stores a value in mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, NEVER) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_tuned_is_purge_delay_and_purging_ends() {
        // SAFETY: reading an option loads a value from mimalloc's option table.
        let get = || unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        // purge_delay's default in the bundled mimalloc 3 (options.c): 1000 ms. A
        // binding whose enum moved would point at an option with another default.
        assert_eq!(get(), 1000, "PURGE_DELAY is not mimalloc's purge_delay");
        tune();
        assert_eq!(get(), NEVER);
    }
}
