//! Command-line interface.

/// `println!` for a command's output. A reader that stops early (`nki ops | head`)
/// ends the command quietly with status 141, as SIGPIPE ends other Unix tools
/// (never 0: the command did not finish), instead of a panic; any other write
/// error is reported and exits 1.
macro_rules! outln {
    () => { $crate::cli::write_stdout_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::cli::write_stdout_line(format_args!($($arg)*)) };
}

mod bench;
mod deadline;
mod demo;
mod demo_decode;
mod emit;
mod error;
mod generic;
mod list;
mod ops;
mod output_plan;
mod profile;
mod run;
mod writeback;

pub use error::CliError;

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
    /// Run a kernel in the emulator on `.npy` inputs and write its outputs as `.npy` (all or
    /// none of them, never over an input or each other): `nki run KERNEL --PARAM FILE|VALUE ...
    /// --out DIR` for any kernel `nki list` shows, or the attention commands below.
    Run(Box<run::RunArgs>),
    /// Print the NKI vocabulary: each official op with its engines, NeuronCore
    /// generations, one-line semantics and whether kernels can call it yet.
    Ops(ops::OpsArgs),
    /// Estimate a kernel's time on Trainium from the instructions it executes
    /// (runs it like `nki run`, then reports the modelled timeline).
    Profile(Box<profile::ProfileArgs>),
    /// Measure the emulator's throughput on the attention kernels.
    Bench(bench::BenchArgs),
    /// Run every attention kernel on random inputs in both precision modes, check
    /// each against float64 attention, and write the NKI package to ./nki_out.
    Demo(demo::DemoArgs),
}

/// Writes one line of `args` to standard output (see `outln!`).
fn write_stdout_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        Err(e) => {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// `text` on one line: its non-empty lines, trimmed and joined by spaces.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Parses the command line and runs the subcommand. Every error is one line: a
/// usage error exits with clap's code 2 here; other errors carry their exit code.
pub fn run() -> Result<(), CliError> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // Up to the first blank line: clap follows the error with usage and tips.
            let rendered = e.render().to_string();
            eprintln!("{}", one_line(rendered.split("\n\n").next().unwrap_or_default()));
            std::process::exit(e.exit_code());
        }
    };
    dispatch(cli.command).map_err(|e| CliError { message: one_line(&e.message), ..e })
}

fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::Emit(args) => emit::run(&args)?,
        Command::List => list::run(),
        Command::Ops(args) => ops::run(&args),
        Command::Run(args) => run::run(&args)?,
        Command::Profile(args) => profile::run(&args)?,
        Command::Bench(args) => bench::run(&args)?,
        Command::Demo(args) => demo::run(&args)?,
    }
    Ok(())
}
