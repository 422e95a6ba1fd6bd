//! The `nki` command: emit the registered kernels as a Python package, run the
//! attention kernels in the emulator, benchmark them, and demo everything.

mod cli;
mod host_memory;

#[global_allocator]
static ALLOC: host_memory::HugePageAlloc = host_memory::HugePageAlloc;

use std::process::ExitCode;

fn main() -> ExitCode {
    host_memory::tune_heaps();
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
