//! The `nki` command: emit the registered kernels as a Python package, run the
//! attention kernels in the emulator, benchmark them, and demo everything.

mod cli;

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
