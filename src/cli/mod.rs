//! The `nki` command line as a library: `run`, `profile`, `tune`, `emit`, `list`,
//! `ops` and `traceback` over every kernel linked into the program.
//!
//! A crate of kernels gets the whole command with one line as its
//! `src/main.rs` (beside the `mod` / `use` lines that name its kernel modules
//! and the kernel crates it depends on, which is what links their kernels in):
//!
//! ```no_run
//! nki::main!();
//! ```
//!
//! `cargo run --release -- list` then lists the crate's kernels (and those of
//! the crates it uses, the [`attention`](crate::attention) kernels included),
//! `cargo run --release -- run KERNEL --help` shows a kernel's flags. A binary
//! with commands of its own passes them as a [`clap::Subcommand`] with the
//! function that runs them: `nki::main!(Extra, run_extra)` (the `nki` binary
//! adds `demo` and `bench` so).

/// `println!` for a command's output. A reader that stops early (`nki ops | head`)
/// ends the command quietly with status 141, as SIGPIPE ends other Unix tools
/// (never 0: the command did not finish), instead of a panic; any other write
/// error is reported and exits 1.
#[macro_export]
macro_rules! outln {
    () => { $crate::cli::write_stdout_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::cli::write_stdout_line(format_args!($($arg)*)) };
}

/// The `main` of a binary that is the `nki` command for the kernels linked
/// into it (see [the module docs](crate::cli)): `nki::main!();`, or
/// `nki::main!(Extra, run_extra)` for a binary that adds the subcommands of
/// the [`clap::Subcommand`] `Extra`, run by `run_extra: fn(Extra) ->
/// Result<(), nki::cli::CliError>`. It also makes mimalloc the binary's
/// allocator ([`Allocator`]).
#[macro_export]
macro_rules! main {
    () => {
        $crate::main!($crate::cli::NoCommands, $crate::cli::no_commands);
    };
    ($extra:ty, $run:expr $(,)?) => {
        /// The emulator's allocator (see `nki::cli::Allocator`).
        #[global_allocator]
        static NKI_ALLOCATOR: $crate::cli::Allocator = $crate::cli::Allocator;

        fn main() -> ::std::process::ExitCode {
            $crate::cli::main_with::<$extra>($run)
        }
    };
}

mod allocator;
mod deadline;
mod emit;
mod error;
mod generic;
mod list;
mod ops;
mod output_plan;
mod profile;
mod run;
mod traceback;
mod tune;
mod writeback;

pub use allocator::Allocator;
pub use allocator::tune as tune_allocator;
pub use error::CliError;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;
use std::sync::OnceLock;

/// nki-rs: AWS Trainium NKI kernels written in Rust, emitted as NKI 2.x Python and
/// emulated on the CPU.
#[derive(Parser)]
#[command(name = "nki", version, about, long_about = None, propagate_version = true)]
struct Cli<E: Subcommand> {
    #[command(subcommand)]
    command: Commands<E>,
}

/// The commands: the kernel commands every binary has, then the binary's own.
#[derive(Subcommand)]
enum Commands<E: Subcommand> {
    #[command(flatten)]
    Kernels(Command),
    #[command(flatten)]
    Extra(E),
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
    /// Profile every variant of a grid of a kernel's tunable parameters (`--PARAM v1,v2,...`),
    /// check each variant's outputs against the first's, and rank them by estimated time.
    Tune(tune::TuneArgs),
    /// Translate the output of a failed run of the emitted package (a Python
    /// traceback, an `error:` line naming `module.py:LINE`) by printing the
    /// kernel's Rust file and line under each line of the package it names.
    Traceback(traceback::TracebackArgs),
}

/// No commands beyond the kernel commands (what `nki::main!()` adds).
#[derive(Subcommand)]
pub enum NoCommands {}

/// Runs a [`NoCommands`] (there are none).
pub fn no_commands(command: NoCommands) -> Result<(), CliError> {
    match command {}
}

/// The name the command was started by (its executable's file name): how
/// messages name it (`nki list`, or `mykernels list` for a crate's binary).
pub fn program() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::env::args_os()
            .next()
            .and_then(|a| std::path::Path::new(&a).file_stem().map(|s| s.to_string_lossy().into_owned()))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "nki".to_string())
    })
}

/// The `nki` command over the kernels linked into the program, with no
/// commands of its own: parses the command line, runs, and returns the exit
/// status (0; 2 for refused input; 1 for a failure).
pub fn main() -> ExitCode {
    main_with::<NoCommands>(no_commands)
}

/// [`main`] for a binary that adds the subcommands of `E`, run by `run_extra`.
pub fn main_with<E: Subcommand>(run_extra: impl FnOnce(E) -> Result<(), CliError>) -> ExitCode {
    allocator::tune();
    match run::<E>(run_extra) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

/// Writes one line of `args` to standard output (see [`outln!`](crate::outln)).
#[doc(hidden)]
pub fn write_stdout_line(args: std::fmt::Arguments<'_>) {
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
fn run<E: Subcommand>(run_extra: impl FnOnce(E) -> Result<(), CliError>) -> Result<(), CliError> {
    let command = Cli::<E>::command().name(program()).bin_name(program());
    let parsed = command.try_get_matches().and_then(|m| Cli::<E>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // Up to the first blank line: clap follows the error with usage and tips.
            let rendered = e.render().to_string();
            eprintln!("{}", one_line(rendered.split("\n\n").next().unwrap_or_default()));
            std::process::exit(e.exit_code());
        }
    };
    let result = match cli.command {
        Commands::Kernels(command) => dispatch(command),
        Commands::Extra(extra) => run_extra(extra),
    };
    result.map_err(|e| CliError { message: one_line(&e.message), ..e })
}

fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::Emit(args) => emit::run(&args)?,
        Command::List => list::run(),
        Command::Ops(args) => ops::run(&args)?,
        Command::Run(args) => run::run(&args)?,
        Command::Profile(args) => profile::run(&args)?,
        Command::Tune(args) => tune::run(&args)?,
        Command::Traceback(args) => traceback::run(&args)?,
    }
    Ok(())
}
