//! `nki run <kernel>`: runs a library kernel in the emulator on `.npy` inputs.

mod attention_cte;
mod attention_tkg;
mod ring_bwd;
mod ring_fwd;

use super::output_plan::OutputPlan;
use super::{CliError, generic};
use clap::{Args, Subcommand, ValueEnum};
use nki::attention::dtypes::ParamDtypes;
use nki::attention::shard::{SeqLayout, shard_bias, shard_ids};
use nki::{Dtype, Launch, Precision, Tensor};

/// Per-rank `(q, kv)` segment ids.
pub type SegmentIds = (Vec<Tensor>, Vec<Tensor>);
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The launch every kernel command starts from when set (`nki profile` sets a
/// profiled one, whose recording it reads after the run); a plain launch otherwise.
pub static BASE_LAUNCH: OnceLock<Launch> = OnceLock::new();

/// Arguments of `nki run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(subcommand)]
    kernel: Runnable,
}

/// What `nki run` runs: an attention command, or any registered kernel by name.
#[derive(Subcommand)]
enum Runnable {
    #[command(flatten)]
    Attention(Box<Kernel>),
    /// Any kernel `nki list` shows: `KERNEL --PARAM FILE.npy|VALUE ... --out DIR`
    /// (`nki run KERNEL --help` lists its parameters).
    #[command(external_subcommand)]
    Registered(Vec<String>),
}

/// The attention kernels, with their dedicated flags (for `nki run` and `nki profile`).
#[derive(Subcommand)]
pub enum Kernel {
    /// Prefill flash attention (`attention_cte`) on inputs in the kernel's layouts.
    AttentionCte(attention_cte::CteArgs),
    /// Decode attention (`attention_tkg`): one token-generation step over a KV
    /// cache, inputs in the kernel's layouts.
    AttentionTkg(attention_tkg::TkgArgs),
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
    /// Logical NeuronCore degree: 1 (no grid) or 2. Default: the target's default
    /// LNC, as neuronx-cc compiles (2 on trn2 and trn3, 1 on trn1).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    lnc: Option<u8>,
    /// Numeric model.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Hardware)]
    precision: PrecisionArg,
    /// Threads to keep busy (default: every core). Each LNC program of each rank
    /// has its own thread; spare threads split large instructions. Results are
    /// the same bits for every value.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Stop a run that takes longer than SECS seconds, with an error naming what
    /// each rank was doing.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, allow_hyphen_values = true)]
    timeout: Option<Duration>,
}

/// `--timeout`: a positive, finite number of seconds.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| "expected a number of seconds".to_string())?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("the time limit must be a positive, finite number of seconds".to_string()),
    }
}

/// How a whole sequence is split over the ranks of a ring.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Rank `r` holds tokens `[r·S_local, (r+1)·S_local)`.
    Contiguous,
    /// Rank `r` holds the tokens `t` with `t mod workers == r`.
    Striped,
    /// The sequence cut into `2·workers` chunks; rank `r` holds chunks `r` and `2·workers-1-r`.
    Zigzag,
}

/// The ring options shared by the ring kernels.
#[derive(Args)]
pub struct RingArgs {
    /// Ranks in the ring (`num_workers`, at least 1); each holds `S_total / workers` tokens (a multiple of 128).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Causal mask over global positions.
    #[arg(long)]
    causal: bool,
    /// How the sequence is split over the ranks; striped and zigzag need `--causal`.
    #[arg(long, value_enum, default_value_t = LayoutArg::Contiguous, requires_if("striped", "causal"), requires_if("zigzag", "causal"))]
    layout: LayoutArg,
    /// Alias of `--layout striped`.
    #[arg(long, conflicts_with = "layout")]
    striped: bool,
    /// Sliding window `L` or `L,R`: key `j` visible to query `i` only if `i-L <= j <= i+R` (one number: `L = R`).
    #[arg(long, value_name = "L[,R]", value_parser = parse_window, allow_hyphen_values = true)]
    sliding_window: Option<(i64, i64)>,
    /// Chunked attention: key `j` visible to query `i` only if `i / C == j / C`.
    #[arg(long, value_name = "C", value_parser = clap::value_parser!(i64).range(1..))]
    chunk_size: Option<i64>,
    /// Logit soft cap `C > 0`: logits `C·tanh(scale·q·k / C)`.
    #[arg(long, value_name = "C", value_parser = parse_soft_cap)]
    soft_cap: Option<f64>,
    /// Sink logits, float32 `[h]`: one per query head in every row's softmax denominator.
    #[arg(long, value_name = "FILE")]
    sinks: Option<PathBuf>,
    /// Query segment ids, int32 `[b, S_total]`: key `j` visible to query `i` only if their ids match.
    #[arg(long, value_name = "FILE", requires = "kv_segment_ids")]
    q_segment_ids: Option<PathBuf>,
    /// Key segment ids, int32 `[b, S_total]` (with `--q-segment-ids`).
    #[arg(long, value_name = "FILE", requires = "q_segment_ids")]
    kv_segment_ids: Option<PathBuf>,
    /// Bias, float32 `[b, h, S_total, S_total]`, added to the logits after the soft cap.
    #[arg(long, value_name = "FILE")]
    bias: Option<PathBuf>,
    /// Softmax scale (default `1/sqrt(d)`): a finite float32 value.
    #[arg(long, allow_negative_numbers = true)]
    scale: Option<f64>,
}

/// `--soft-cap`: a positive finite number.
fn parse_soft_cap(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|c| *c > 0.0 && *c <= f64::from(f32::MAX))
        .ok_or_else(|| format!("`{s}` is not a positive finite float32"))
}

/// `--sliding-window`: `L` or `L,R`, non-negative token counts.
fn parse_window(s: &str) -> Result<(i64, i64), String> {
    let side = |x: &str| -> Result<i64, String> {
        x.trim().parse::<i64>().ok().filter(|&n| n >= 0).ok_or_else(|| format!("`{x}` is not a non-negative number of tokens"))
    };
    match s.split_once(',') {
        Some((l, r)) => Ok((side(l)?, side(r)?)),
        None => side(s).map(|n| (n, n)),
    }
}

impl RingArgs {
    /// How the sequence is split over the ranks.
    pub fn layout(&self) -> SeqLayout {
        match (self.striped, self.layout) {
            (true, _) | (false, LayoutArg::Striped) => SeqLayout::Striped,
            (false, LayoutArg::Zigzag) => SeqLayout::Zigzag,
            (false, LayoutArg::Contiguous) => SeqLayout::Contiguous,
        }
    }

    /// The sliding window `(L, R)`, the chunk size and the soft cap.
    pub fn masks(&self) -> (Option<(i64, i64)>, Option<i64>, Option<f64>) {
        (self.sliding_window, self.chunk_size, self.soft_cap)
    }

    /// `--sinks`, loaded and checked as float32 `[h]` by the kernel's table.
    pub fn load_sinks(&self, plan: &mut OutputPlan, dtypes: &ParamDtypes) -> Result<Option<Tensor>, String> {
        let Some(path) = &self.sinks else {
            return Ok(None);
        };
        declare_inputs(plan, &[("sinks", path.as_path())])?;
        let t = load(plan, path, "sinks", dtypes)?;
        if t.shape().len() != 1 {
            return Err(format!("--sinks {}: shape {:?} must be [h], one logit per query head", path.display(), t.shape()));
        }
        Ok(Some(t))
    }

    /// `--q-segment-ids` and `--kv-segment-ids`, each int32 `[batch, S_total]`,
    /// sharded over the ring in its layout (None without them).
    pub fn load_segment_ids(&self, plan: &mut OutputPlan, batch: usize, s_total: usize) -> Result<Option<SegmentIds>, String> {
        let (Some(q_path), Some(kv_path)) = (&self.q_segment_ids, &self.kv_segment_ids) else {
            return Ok(None);
        };
        let files = [("q_segment_ids", q_path.as_path()), ("kv_segment_ids", kv_path.as_path())];
        declare_inputs(plan, &files)?;
        let mut parts = Vec::with_capacity(2);
        for (param, path) in files {
            let flag = flag_of(param);
            let t = plan.read(path).map_err(|e| format!("--{flag} {e}"))?;
            if t.dtype() != Dtype::I32 || t.shape() != [batch, s_total] {
                return Err(format!(
                    "--{flag} {}: {} {:?} must be int32 [{batch}, {s_total}] ([b, S_total], one id per token)",
                    path.display(),
                    t.dtype(),
                    t.shape()
                ));
            }
            parts.push(shard_ids(&t, self.workers, self.layout()).map_err(|e| format!("--{flag} {}: {e}", path.display()))?);
        }
        let kv = parts.pop().unwrap_or_default();
        let q = parts.pop().unwrap_or_default();
        Ok(Some((q, kv)))
    }

    /// `--bias`, float32 `[batch, heads, S_total, S_total]`, sharded by query
    /// rows over the ring (None without it).
    pub fn load_bias(&self, plan: &mut OutputPlan, batch: usize, heads: usize, s_total: usize) -> Result<Option<Vec<Tensor>>, String> {
        let Some(path) = &self.bias else {
            return Ok(None);
        };
        declare_inputs(plan, &[("bias", path.as_path())])?;
        let t = plan.read(path).map_err(|e| format!("--bias {e}"))?;
        let want = [batch, heads, s_total, s_total];
        if t.dtype() != Dtype::F32 || t.shape() != want {
            return Err(format!(
                "--bias {}: {} {:?} must be float32 {want:?} ([b, h, S_total, S_total], query rows by key columns)",
                path.display(),
                t.dtype(),
                t.shape()
            ));
        }
        shard_bias(&t, self.workers, self.layout()).map(Some).map_err(|e| format!("--bias {}: {e}", path.display()))
    }

    /// `--workers` as the kernels' `num_workers`.
    pub fn num_workers(&self) -> Result<i64, String> {
        i64::try_from(self.workers).map_err(|_| format!("--workers {} is too large", self.workers))
    }
}

impl LaunchArgs {
    /// The emulator launch these options describe.
    pub fn launch(&self) -> Launch {
        let p = match self.precision {
            PrecisionArg::Hardware => Precision::Hardware,
            PrecisionArg::Fp32 => Precision::Fp32,
        };
        let base = BASE_LAUNCH.get().cloned().unwrap_or_default();
        let lnc = self.lnc.map_or(base.hardware().limits().default_lnc, usize::from);
        let launch = base.lnc(lnc).precision(p);
        let launch = match self.threads {
            Some(n) => launch.threads(usize::from(n)),
            None => launch,
        };
        match self.timeout {
            Some(limit) => launch.timeout(limit),
            None => launch,
        }
    }
}

/// The command-line flag of kernel parameter `param` (`k_prior` is `--k-prior`).
pub fn flag_of(param: &str) -> String {
    param.replace('_', "-")
}

/// Declares the input files of a command, each under its parameter's flag.
pub fn declare_inputs(plan: &mut OutputPlan, files: &[(&str, &Path)]) -> Result<(), String> {
    files.iter().try_for_each(|(param, path)| plan.input(&flag_of(param), path))
}

/// Loads the `.npy` file of kernel parameter `param` as a tensor of the dtype its
/// element type loads as, refusing dtypes the kernel does not take for `param`;
/// reads with the threads `plan` allows.
pub fn load(plan: &OutputPlan, path: &Path, param: &str, dtypes: &ParamDtypes) -> Result<Tensor, String> {
    checked(param, path, plan.read(path), dtypes)
}

/// [`load`] for several files, read together (see [`OutputPlan::read_all`]);
/// the first file in order that fails is the error.
pub fn load_all(plan: &OutputPlan, files: &[(&str, &Path)], dtypes: &ParamDtypes) -> Result<Vec<Tensor>, String> {
    let paths: Vec<&Path> = files.iter().map(|(_, path)| *path).collect();
    files.iter().zip(plan.read_all(&paths)).map(|(&(param, path), read)| checked(param, path, read, dtypes)).collect()
}

/// The tensor read from `param`'s file, if it read and has a dtype `param` takes.
fn checked(param: &str, path: &Path, read: nki::Result<Tensor>, dtypes: &ParamDtypes) -> Result<Tensor, String> {
    let flag = flag_of(param);
    let t = read.map_err(|e| format!("--{flag} {e}"))?;
    dtypes.check(param, &t).map_err(|e| format!("--{flag} {}: {e}", path.display()))?;
    Ok(t.named(param))
}

/// Loads whole-sequence inputs that must share the `[b, h, S_total, d]` shape of the first.
pub fn load_alike(plan: &OutputPlan, files: &[(&str, &Path)], dtypes: &ParamDtypes) -> Result<Vec<Tensor>, String> {
    let tensors = load_all(plan, files, dtypes)?;
    for ((param, _), t) in files.iter().zip(&tensors).skip(1) {
        if t.shape() != tensors[0].shape() {
            return Err(format!(
                "--{param} has shape {:?} but --{} has {:?}; all of them are [b, h, S_total, d]",
                t.shape(),
                files[0].0,
                tensors[0].shape()
            ));
        }
    }
    Ok(tensors)
}

/// Runs the chosen kernel.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    match &args.kernel {
        Runnable::Attention(k) => Ok(run_kernel(k)?),
        Runnable::Registered(raw) => generic::run("run", raw, true).map(drop),
    }
}

/// Runs `kernel` with its flags.
pub fn run_kernel(kernel: &Kernel) -> Result<(), String> {
    match kernel {
        Kernel::AttentionCte(a) => attention_cte::run(a),
        Kernel::AttentionTkg(a) => attention_tkg::run(a),
        Kernel::RingFwd(a) => ring_fwd::run(a),
        Kernel::RingBwd(a) => ring_bwd::run(a),
    }
}

/// An optional path that a flag requires.
pub fn required_path<'a>(p: &'a Option<PathBuf>, flag: &str, because: &str) -> Result<&'a Path, String> {
    p.as_deref().ok_or_else(|| format!("{flag} is required {because}"))
}
