//! The `nki` command: emit the registered kernels as a Python package, run the
//! attention kernels in the emulator, benchmark them, and demo everything.

mod allocator;
mod cli;

/// See [`allocator`].
#[global_allocator]
static ALLOC: allocator::Allocator = mimalloc::MiMalloc;

use std::process::ExitCode;

fn main() -> ExitCode {
    allocator::tune();
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
