//! Command-line interface.

mod bench;
mod demo;
mod emit;
mod list;
mod run;

use clap::{Parser, Subcommand};

/// nki-rs: AWS Trainium NKI kernels written in Rust, emitted as NKI 2.x Python and
/// emulated on the CPU.
#[derive(Parser)]
#[command(name = "nki", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write every registered kernel as an importable Python package (one module
    /// per kernel source file, `__init__.py` re-exporting the kernels).
    Emit(emit::EmitArgs),
    /// List the registered kernels and the Python module each lands in.
    List,
    /// Run a library kernel in the emulator on `.npy` inputs and write its outputs as `.npy`.
    Run(Box<run::RunArgs>),
    /// Measure the emulator's throughput on the attention kernels.
    Bench(bench::BenchArgs),
    /// Run every attention kernel on random inputs in both precision modes, check
    /// each against float64 attention, and write the NKI package to ./nki_out.
    Demo(demo::DemoArgs),
}

/// Parses the command line and runs the subcommand.
pub fn run() -> Result<(), String> {
    match Cli::parse().command {
        Command::Emit(args) => emit::run(&args),
        Command::List => {
            list::run();
            Ok(())
        }
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Demo(args) => demo::run(&args),
    }
}
