//! The `nki` command: the kernel commands (`run`, `profile`, `emit`, `list`,
//! `ops`, `traceback`) over this workspace's kernels — the attention kernels,
//! the library kernels of `nkilib` and the example kernels — plus `demo` and `bench`.

mod bench;
mod demo;
mod layer;

// Linking the library and example kernels registers them.
use nki_examples as _;
use nkilib as _;

/// The `nki` binary's own commands.
#[derive(clap::Subcommand)]
enum Ours {
    /// Measure the emulator's throughput on the attention kernels.
    Bench(bench::BenchArgs),
    /// Run every attention kernel on random inputs in both precision modes, check
    /// each against float64 attention, and write the NKI package to ./nki_out.
    Demo(demo::DemoArgs),
}

fn run_ours(command: Ours) -> Result<(), nki::cli::CliError> {
    match command {
        Ours::Bench(args) => bench::run(&args)?,
        Ours::Demo(args) => demo::run(&args)?,
    }
    Ok(())
}

nki::main!(Ours, run_ours);
