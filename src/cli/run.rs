//! `nki run <kernel>`: runs a library kernel in the emulator on `.npy` inputs.

mod attention_cte;
mod ring_bwd;
mod ring_fwd;

use clap::{Args, Subcommand, ValueEnum};
use nki::attention::shard::SeqLayout;
use nki::io::npy::{read_npy, write_tensor_npy};
use nki::{Launch, Precision, Tensor};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `nki run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(subcommand)]
    kernel: Kernel,
}

#[derive(Subcommand)]
enum Kernel {
    /// Prefill flash attention (`attention_cte`) on inputs in the kernel's layouts.
    AttentionCte(attention_cte::CteArgs),
    /// Ring attention forward (`ring_attention_spmd_fwd`) on whole-sequence inputs,
    /// sharded over `--workers` emulated ranks and gathered back.
    RingFwd(ring_fwd::RingFwdArgs),
    /// Ring attention backward (`ring_attention_spmd_bwd`): dQ, dK, dV of whole-sequence
    /// inputs, sharded over `--workers` emulated ranks and gathered back.
    RingBwd(ring_bwd::RingBwdArgs),
}

/// The emulator's numeric model.
#[derive(Clone, Copy, ValueEnum)]
pub enum PrecisionArg {
    /// Round to each tile's dtype as the device does.
    Hardware,
    /// Keep every value in f32.
    Fp32,
}

/// Launch options shared by the kernels.
#[derive(Args)]
pub struct LaunchArgs {
    /// Logical NeuronCore degree: 1 (no grid) or 2.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    lnc: u8,
    /// Numeric model.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Hardware)]
    precision: PrecisionArg,
    /// Stop a run that takes longer than SECS seconds, with an error naming what
    /// each rank was doing.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, allow_hyphen_values = true)]
    timeout: Option<Duration>,
}

/// `--timeout`: a positive, finite number of seconds.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| "expected a number of seconds".to_string())?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("the time limit must be a positive, finite number of seconds".to_string()),
    }
}

/// The ring options shared by the ring kernels.
#[derive(Args)]
pub struct RingArgs {
    /// Ranks in the ring; each holds `S_total / workers` tokens (a multiple of 128).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Causal mask over global positions.
    #[arg(long)]
    causal: bool,
    /// Rank `r` holds the tokens `t` with `t mod workers == r` (needs `--causal`); else contiguous blocks.
    #[arg(long)]
    striped: bool,
    /// Softmax scale (default `1/sqrt(d)`).
    #[arg(long)]
    scale: Option<f64>,
}

impl RingArgs {
    /// How the sequence is split over the ranks.
    pub fn layout(&self) -> SeqLayout {
        if self.striped { SeqLayout::Striped } else { SeqLayout::Contiguous }
    }
}

impl LaunchArgs {
    /// The emulator launch these options describe.
    pub fn launch(&self) -> Launch {
        let p = match self.precision {
            PrecisionArg::Hardware => Precision::Hardware,
            PrecisionArg::Fp32 => Precision::Fp32,
        };
        let launch = Launch::new().lnc(usize::from(self.lnc)).precision(p);
        match self.timeout {
            Some(limit) => launch.timeout(limit),
            None => launch,
        }
    }
}

/// Loads a `.npy` input as a tensor of its own dtype (float64 files load as f32).
pub fn load(path: &Path, what: &str) -> Result<Tensor, String> {
    let arr = read_npy(path).map_err(|e| format!("--{what}: {e}"))?;
    arr.to_tensor(None).map_err(|e| format!("--{what} {}: {e}", path.display())).map(|t| t.named(what))
}

/// Loads whole-sequence inputs that must share the `[b, h, S_total, d]` shape of the first.
pub fn load_alike(files: &[(&str, &Path)]) -> Result<Vec<Tensor>, String> {
    let tensors = files.iter().map(|(flag, path)| load(path, flag)).collect::<Result<Vec<_>, _>>()?;
    for ((flag, _), t) in files.iter().zip(&tensors).skip(1) {
        if t.shape() != tensors[0].shape() {
            return Err(format!(
                "--{flag} has shape {:?} but --{} has {:?}; all of them are [b, h, S_total, d]",
                t.shape(),
                files[0].0,
                tensors[0].shape()
            ));
        }
    }
    Ok(tensors)
}

/// Writes a tensor as `.npy` (float32, or int32 for integer dtypes).
pub fn save(path: &Path, t: &Tensor) -> Result<(), String> {
    write_tensor_npy(path, t).map_err(|e| e.to_string())?;
    println!("wrote {} {:?} {}", path.display(), t.shape(), t.dtype());
    Ok(())
}

/// Runs the chosen kernel.
pub fn run(args: &RunArgs) -> Result<(), String> {
    match &args.kernel {
        Kernel::AttentionCte(a) => attention_cte::run(a),
        Kernel::RingFwd(a) => ring_fwd::run(a),
        Kernel::RingBwd(a) => ring_bwd::run(a),
    }
}

/// An optional output path that a flag requires.
pub fn required_path<'a>(p: &'a Option<PathBuf>, flag: &str, because: &str) -> Result<&'a Path, String> {
    p.as_deref().ok_or_else(|| format!("{flag} is required {because}"))
}
