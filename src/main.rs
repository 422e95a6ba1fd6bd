//! The `nki` command: emit the registered kernels as a Python package, run the
//! attention kernels in the emulator, benchmark them, and demo everything.

mod cli;

/// mimalloc instead of the system allocator. An emulator run allocates the
/// inputs, every tile and output and the matmul kernels' buffers from one thread
/// per LNC program and rank. glibc grows a separate arena per thread in 4 KiB
/// pages: every first touch is a page fault (costly in a virtual machine),
/// growing an arena changes the address space under the other threads, and
/// tearing the arenas down at exit takes milliseconds. mimalloc carves every
/// thread's heap from large segments advised to use transparent huge pages, and
/// memory freed by one thread serves the next allocation of another. Whole
/// `nki run attention-cte` processes (8 × 2048 × 128 fp32, causal, 2-vCPU
/// machine) went from 116 to 100 ms on one thread and from 68 to 58 ms with two
/// LNC programs.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
