//! `nki run <kernel>`: runs a library kernel in the emulator on `.npy` inputs.

mod attention_cte;
mod attention_tkg;
mod ring_bwd;
mod ring_fwd;

use super::output_plan::{Input, OutputPlan};
use super::{CliError, deadline, generic};
use clap::{Args, Subcommand, ValueEnum};
use nki::attention::dtypes::ParamDtypes;
use nki::attention::ring_config::RingFeatures;
use nki::attention::shard::{SeqLayout, shard_bias, shard_ids};
use nki::{Launch, Precision, Tensor};

/// Per-rank `(q, kv)` segment ids.
pub type SegmentIds = (Vec<Tensor>, Vec<Tensor>);

/// The ring's optional inputs, declared: sinks, `(q, kv)` segment ids, bias.
pub struct RingExtras {
    sinks: Option<Input>,
    ids: Option<(Input, Input)>,
    bias: Option<Input>,
}

/// The ring's optional inputs, read: sinks, per-rank segment ids, per-rank bias.
pub type ReadExtras = (Option<Tensor>, Option<SegmentIds>, Option<Vec<Tensor>>);
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

/// The whole-sequence queries, keys and values both ring kernels take.
#[derive(Args)]
pub struct RingQkv {
    /// Queries `[b, h, S_total, d]`, unscaled (the run applies the softmax scale).
    #[arg(long)]
    q: PathBuf,
    /// Keys `[b, h_kv, S_total, d]`, `h` a multiple of `h_kv` (grouped-query attention).
    #[arg(long)]
    k: PathBuf,
    /// Values `[b, h_kv, S_total, d]`.
    #[arg(long)]
    v: PathBuf,
}

impl RingQkv {
    /// The files by their flag names, `q`, `k`, `v`.
    pub fn files(&self) -> [(&'static str, &Path); 3] {
        [("q", &self.q), ("k", &self.k), ("v", &self.v)]
    }
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

    /// The ring features both passes take: workers, mask, layout, window, chunks,
    /// soft cap and scale (the shapes come from the files).
    pub fn features(&self) -> Result<RingFeatures, String> {
        Ok(RingFeatures {
            causal: self.causal,
            layout: self.layout(),
            window: self.sliding_window,
            chunk_size: self.chunk_size,
            soft_cap: self.soft_cap,
            softmax_scale: self.scale,
            ..RingFeatures::new(self.num_workers()?)
        })
    }

    /// Declares the optional inputs of the ring (`--sinks`, the segment ids,
    /// `--bias`) and checks their headers: dtypes by the kernel's contract,
    /// sinks `[h]`, segment ids `[batch, S_total]`, bias `[batch, heads,
    /// S_total, S_total]`.
    pub fn declare_extras(
        &self,
        plan: &mut OutputPlan,
        dtypes: &ParamDtypes,
        [batch, heads, s_total]: [usize; 3],
    ) -> Result<RingExtras, CliError> {
        let sinks = match &self.sinks {
            Some(path) => {
                let [i] = declare_checked(plan, &[("sinks", path)], dtypes)?[..] else { unreachable!("one file declared") };
                expect_shape(plan, i, &[heads], "[h], one logit per query head")?;
                Some(i)
            }
            None => None,
        };
        let ids = match (&self.q_segment_ids, &self.kv_segment_ids) {
            (Some(q), Some(kv)) => {
                let [qi, kvi] = declare_checked(plan, &[("q_segment_ids", q), ("kv_segment_ids", kv)], dtypes)?[..] else {
                    unreachable!("two files declared")
                };
                for i in [qi, kvi] {
                    expect_shape(plan, i, &[batch, s_total], "[b, S_total], one id per token")?;
                }
                Some((qi, kvi))
            }
            _ => None,
        };
        let bias = match &self.bias {
            Some(path) => {
                let [i] = declare_checked(plan, &[("bias", path)], dtypes)?[..] else { unreachable!("one file declared") };
                expect_shape(plan, i, &[batch, heads, s_total, s_total], "[b, h, S_total, S_total], query rows by key columns")?;
                Some(i)
            }
            None => None,
        };
        Ok(RingExtras { sinks, ids, bias })
    }

    /// Per-rank stand-ins of the declared optional inputs (see [`placeholder`]),
    /// for the typed API's checks before any payload is read.
    pub fn extra_stand_ins(
        &self,
        plan: &OutputPlan,
        extras: &RingExtras,
        [b, h, st]: [usize; 3],
        sl: usize,
    ) -> Result<ReadExtras, CliError> {
        let sinks = extras.sinks.map(|i| placeholder(plan, i)).transpose()?;
        let ids = match extras.ids {
            Some((q, kv)) => Some((
                stand_ins(&[b, sl], plan.header(q).dtype(), self.workers)?,
                stand_ins(&[b, sl], plan.header(kv).dtype(), self.workers)?,
            )),
            None => None,
        };
        let bias = extras.bias.map(|i| stand_ins(&[b, h, sl, st], plan.header(i).dtype(), self.workers)).transpose()?;
        Ok((sinks, ids, bias))
    }

    /// Reads the optional inputs declared by [`declare_extras`](Self::declare_extras),
    /// the segment ids and the bias sharded over the ring in its layout.
    pub fn read_extras(&self, plan: &OutputPlan, extras: &RingExtras) -> Result<ReadExtras, CliError> {
        let sinks = extras.sinks.map(|i| plan.read(i).map(|t| t.named("sinks"))).transpose().map_err(CliError::usage)?;
        let (w, layout) = (self.workers, self.layout());
        let ids = match extras.ids {
            Some((q, kv)) => {
                let mut parts = Vec::with_capacity(2);
                for i in [q, kv] {
                    let t = plan.read(i).map_err(CliError::usage)?;
                    parts.push(shard_ids(&t, w, layout).map_err(|e| CliError::usage(format!("{}: {e}", plan.describe(i))))?);
                }
                let kv = parts.pop().unwrap_or_default();
                Some((parts.pop().unwrap_or_default(), kv))
            }
            None => None,
        };
        let bias = match extras.bias {
            Some(i) => {
                let t = plan.read(i).map_err(CliError::usage)?;
                Some(shard_bias(&t, w, layout).map_err(|e| CliError::usage(format!("{}: {e}", plan.describe(i))))?)
            }
            None => None,
        };
        Ok((sinks, ids, bias))
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
        // `--timeout` bounds the whole command: the launch gets what is left
        // of it when it starts (see `deadline::bound`).
        launch
    }

    /// Arms `--timeout` over the whole command (see [`deadline`]).
    pub fn start_deadline(&self) {
        deadline::start(self.timeout);
    }

    /// The output plan of a command with these options: the launch's threads
    /// read the inputs; outputs are float32 under `--precision fp32`.
    pub fn plan(&self, launch: &Launch) -> OutputPlan {
        OutputPlan::new().threads(launch.thread_budget()).widen_floats(matches!(self.precision, PrecisionArg::Fp32))
    }
}

/// The command-line flag of kernel parameter `param` (`k_prior` is `--k-prior`).
pub fn flag_of(param: &str) -> String {
    param.replace('_', "-")
}

/// Declares the input files of a command, each under its parameter's flag:
/// opens each (a regular file), reads its header and checks its dtype against
/// the kernel's contract, before any payload is read.
pub fn declare_checked(plan: &mut OutputPlan, files: &[(&str, &Path)], dtypes: &ParamDtypes) -> Result<Vec<Input>, CliError> {
    let mut inputs = Vec::with_capacity(files.len());
    for &(param, path) in files {
        let i = plan.input(&flag_of(param), path).map_err(CliError::usage)?;
        dtypes.check_dtype(param, param, plan.header(i).dtype()).map_err(|e| CliError::usage(format!("{}: {e}", plan.describe(i))))?;
        inputs.push(i);
    }
    Ok(inputs)
}

/// Refuses a declared input whose header's shape is not `want` (`layout` says what it holds).
pub fn expect_shape(plan: &OutputPlan, input: Input, want: &[usize], layout: &str) -> Result<(), CliError> {
    let h = plan.header(input);
    if h.shape() != want {
        return Err(CliError::usage(format!("{}: {} {:?} must be {want:?} ({layout})", plan.describe(input), h.dtype(), h.shape())));
    }
    Ok(())
}

/// Refuses whole-sequence inputs whose headers do not all share the first one's
/// shape (`[b, h, S_total, d]`).
pub fn expect_alike(plan: &OutputPlan, files: &[(&str, Input)]) -> Result<(), CliError> {
    let Some(&(first, i0)) = files.first() else { return Ok(()) };
    let want = plan.header(i0).shape();
    for &(param, i) in &files[1..] {
        let got = plan.header(i).shape();
        if got != want {
            return Err(CliError::usage(format!(
                "--{} has shape {got:?} but --{} has {want:?}; all of them are [b, h, S_total, d]",
                flag_of(param),
                flag_of(first)
            )));
        }
    }
    Ok(())
}

/// Reads declared inputs together (after every check), each tensor named for its parameter.
pub fn read_inputs(plan: &OutputPlan, files: &[(&str, Input)]) -> Result<Vec<Tensor>, CliError> {
    let inputs: Vec<Input> = files.iter().map(|&(_, i)| i).collect();
    files.iter().zip(plan.read_all(&inputs)).map(|(&(param, _), r)| r.map(|t| t.named(param)).map_err(CliError::usage)).collect()
}

/// A stand-in for a declared input with its header's shape and dtype and no
/// data (one element broadcast over every dim), for the typed APIs' checks
/// of shapes and dtypes before any payload is read.
pub fn placeholder(plan: &OutputPlan, input: Input) -> Result<Tensor, CliError> {
    let h = plan.header(input);
    stand_in(h.shape(), h.dtype()).map_err(|e| CliError::usage(format!("{}: {e}", plan.describe(input))))
}

/// A tensor of `shape` and `dtype` holding one element broadcast over every dim.
fn stand_in(shape: &[usize], dtype: nki::Dtype) -> nki::Result<Tensor> {
    let mut t = Tensor::from_f32(&vec![1; shape.len()], &[0.0], dtype)?;
    for (dim, &n) in shape.iter().enumerate() {
        if n != 1 {
            t = t.broadcast(dim, n)?;
        }
    }
    Ok(t)
}

/// One [`stand_in`] per rank of a ring of `workers`.
pub fn stand_ins(shape: &[usize], dtype: nki::Dtype, workers: usize) -> Result<Vec<Tensor>, CliError> {
    (0..workers).map(|_| stand_in(shape, dtype).map_err(|e| CliError::usage(e.to_string()))).collect()
}

/// The `[b, h, S_total, d]` of whole-sequence queries `q` (and of `o`, `dy`),
/// with `kv` (keys and values) alike and `[b, h_kv, S_total, d]`, `h` a
/// multiple of `h_kv`: from the headers.
pub fn whole_sequence(plan: &OutputPlan, q: (&str, Input), kv: &[(&str, Input)]) -> Result<[usize; 4], CliError> {
    let shape = plan.header(q.1).shape();
    let [b, h, st, d] = <[usize; 4]>::try_from(shape)
        .map_err(|_| CliError::usage(format!("{}: shape {shape:?} must be [b, h, S_total, d]", plan.describe(q.1))))?;
    expect_alike(plan, kv)?;
    if let Some(&(param, i)) = kv.first() {
        let got = plan.header(i).shape();
        let fits = matches!(got, &[kb, kh, ks, kd] if kb == b && ks == st && kd == d && kh > 0 && h % kh == 0);
        if !fits {
            return Err(CliError::usage(format!(
                "--{} has shape {got:?} but --{} has {shape:?}; keys and values are [b, h_kv, S_total, d] with h a multiple of h_kv",
                flag_of(param),
                flag_of(q.0)
            )));
        }
    }
    Ok([b, h, st, d])
}

/// A kernel's or typed API's error as the command reports it: one past the
/// command's `--timeout` names the limit, others are usage errors or failures
/// by their kind ([`CliError::from_nki`]).
pub fn launch_error(e: &nki::NkiError) -> CliError {
    match (e.kind, deadline::limit()) {
        (nki::ErrorKind::Timeout, Some(limit)) => {
            CliError::failure(format!("the command did not finish within {limit:?} (--timeout): {e}"))
        }
        _ => CliError::from_nki(e),
    }
}

/// Declares an optional output (given for `nki run`, optional under `nki profile`).
pub fn declare_output(plan: &mut OutputPlan, flag: &str, path: Option<&Path>, required: bool, because: &str) -> Result<(), CliError> {
    match path {
        Some(p) => plan.output(flag, p).map_err(CliError::usage),
        None if required => Err(CliError::usage(format!("--{flag} is required {because}"))),
        None => Ok(()),
    }
}

/// Runs the chosen kernel.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    match &args.kernel {
        Runnable::Attention(k) => run_kernel(k, true),
        Runnable::Registered(raw) => generic::run("run", raw, true).map(drop),
    }
}

/// Runs `kernel` with its flags; `nki run` requires its outputs (`outputs_required`),
/// `nki profile` writes those given.
pub fn run_kernel(kernel: &Kernel, outputs_required: bool) -> Result<(), CliError> {
    match kernel {
        Kernel::AttentionCte(a) => attention_cte::run(a, outputs_required),
        Kernel::AttentionTkg(a) => attention_tkg::run(a, outputs_required),
        Kernel::RingFwd(a) => ring_fwd::run(a, outputs_required),
        Kernel::RingBwd(a) => ring_bwd::run(a, outputs_required),
    }
}
