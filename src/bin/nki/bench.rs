//! `nki bench`: emulator throughput of the attention kernels (decode in tokens
//! per second), whole `nki run` processes on one thread and on every core
//! (optionally against warm JAX CPU attention), and the ring's overhead over one
//! worker; and the decoder layer of `nki demo` (prefill and decode tokens/s)
//! and its MoE step (decode tokens/s).

use crate::layer::{self, moe};
use clap::Args;
use nki::attention::cte::{CteConfig, CteInputs};
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{SeqLayout, shard};
use nki::attention::tkg::{TkgConfig, TkgDims, TkgInputs};
use nki::io::npy::write_tensor_npy;
use nki::outln;
use nki::{Buffer, Dtype, Launch, Precision, Tensor, nisa, nl};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Arguments of `nki bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Logical NeuronCore degree of the launches (2 runs the two programs of each
    /// kernel on two threads).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    lnc: u8,
    /// Runs per case; the fastest is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Only a small case, once (a smoke run).
    #[arg(long)]
    quick: bool,
    /// A Python interpreter with JAX installed: also times JAX's jitted CPU
    /// `jax.nn.dot_product_attention` (warm) on the whole-process shapes.
    #[arg(long, value_name = "PYTHON")]
    jax: Option<PathBuf>,
    /// A Python interpreter with NumPy: the prefill table also times NumPy's
    /// float32 matmul (its BLAS SGEMM on every core) in the same run and gives
    /// each `attention_cte` rate as a share of it.
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    numpy: PathBuf,
    /// Only these tables (repeat or separate with commas; default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Table>,
}

/// The tables `nki bench` prints, in order.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    /// `attention_cte` launches (GFLOP/s).
    Prefill,
    /// `attention_tkg` decode steps (tokens/s).
    Decode,
    /// Whole `nki run attention-cte` processes: one thread, the defaults, JAX.
    Process,
    /// The ring forward against one worker's `attention_cte`.
    Ring,
    /// The ring forward's features (GQA, window, layouts).
    RingFeatures,
    /// The decoder layer of `nki demo`: prefill and decode tokens/s.
    Layer,
    /// The MoE decode step of `nki demo`: decode tokens/s.
    Moe,
}

/// Deterministic inputs in [0, 1).
fn inputs(shape: &[usize], seed: u64, dtype: Dtype) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let vals: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    Tensor::from_f32(shape, &vals, dtype).expect("shape matches")
}

/// The fastest of `reps` runs of `f`, in seconds.
fn best_of(reps: u32, f: impl Fn() -> nki::Result<()>) -> Result<f64, String> {
    let [secs] = best_of_each(reps, || Ok(()), [|| f().map_err(|e| e.to_string())])?;
    Ok(secs)
}

/// The fastest of `reps` runs of each of `fs`, in seconds. The runs take
/// turns (one of each per round, each after an untimed `before`), so a slow
/// spell of the machine falls on all of them alike rather than on one.
fn best_of_each<const N: usize>(
    reps: u32,
    mut before: impl FnMut() -> Result<(), String>,
    mut fs: [impl FnMut() -> Result<(), String>; N],
) -> Result<[f64; N], String> {
    let mut secs = [f64::INFINITY; N];
    for _ in 0..reps {
        for (best, f) in secs.iter_mut().zip(fs.iter_mut()) {
            before()?;
            let start = Instant::now();
            f()?;
            *best = best.min(start.elapsed().as_secs_f64());
        }
    }
    Ok(secs)
}

/// One `attention_cte` case of the prefill table, its inputs made once.
struct CteCase {
    /// `[bs·h, S, d]`.
    shape: [usize; 3],
    causal: bool,
    precision: Precision,
    lnc: usize,
    q: Tensor,
    k: Tensor,
    v: Tensor,
}

impl CteCase {
    fn new([bs, s, d]: [usize; 3], causal: bool, precision: Precision, lnc: usize) -> CteCase {
        let dtype = if precision == Precision::Hardware { Dtype::Bf16 } else { Dtype::F32 };
        let (q, k, v) = (inputs(&[bs, s, d], 1, dtype), inputs(&[bs, d, s], 2, dtype), inputs(&[bs, s, d], 3, dtype));
        CteCase { shape: [bs, s, d], causal, precision, lnc, q, k, v }
    }

    /// One launch on `launch` (its LNC and precision set from the case).
    fn launch(&self, launch: &Launch) -> Result<(), String> {
        let cfg = CteConfig::new().scale(1.0 / (self.shape[2] as f64).sqrt()).causal_mask(self.causal);
        cfg.launch(launch, &CteInputs::new(&self.q, &self.k, &self.v)).map(drop).map_err(|e| e.to_string())
    }

    fn base_launch(&self) -> Launch {
        Launch::new().lnc(self.lnc).precision(self.precision)
    }

    /// Visible attention work: 4·bs·S²·d flops, half when causal.
    fn flops(&self) -> f64 {
        let [bs, s, d] = self.shape;
        4.0 * (bs * s * s * d) as f64 * if self.causal { 0.5 } else { 1.0 }
    }

    /// The `nc_matmul` work the kernel issues, counted from one profiled launch:
    /// more than [`CteCase::flops`] under a causal mask, whose diagonal tiles the
    /// kernel multiplies whole and masks after, as the library does.
    fn issued_flops(&self) -> Result<f64, String> {
        let profiled = self.base_launch().profile(nki::hw::Generation::Trn2);
        self.launch(&profiled)?;
        let timeline = profiled.profiled().map_err(|e| e.to_string())?.timeline;
        Ok(timeline.slices.iter().flatten().filter(|i| i.op == "nisa.nc_matmul").map(|i| i.cost.flops).sum())
    }
}

/// Query heads per KV head and active tokens of the decode benchmark.
const DECODE_HEADS: usize = 8;
const DECODE_TOKENS: usize = 1;

/// The fastest of `reps` timed `attention_tkg` decode steps (`bs` sequences of
/// `DECODE_HEADS` query heads on one KV head, a cache of `s` positions all
/// visible): seconds, decoded tokens per second and GFLOP/s (4·bs·heads·S·d).
fn time_tkg(bs: usize, s: usize, d: usize, precision: Precision, lnc: usize, reps: u32) -> Result<(f64, f64, f64), String> {
    let dtype = if precision == Precision::Hardware { Dtype::Bf16 } else { Dtype::F32 };
    let (h, sa) = (DECODE_HEADS, DECODE_TOKENS);
    let mask = Tensor::from_f32(&[s, bs, h, sa], &vec![1.0; s * bs * h * sa], Dtype::U8).map_err(|e| e.to_string())?;
    let t = [
        inputs(&[d, bs * h * sa], 1, dtype),
        inputs(&[d, bs * sa], 2, dtype),
        inputs(&[bs, 1, sa, d], 3, dtype),
        inputs(&[bs, 1, d, s], 4, dtype),
        inputs(&[bs, 1, s, d], 5, dtype),
    ];
    let i = |v: usize| v as i64;
    let cfg = TkgConfig::new(TkgDims { bs: i(bs), q_head: i(h), s_active: i(sa), curr_sprior: i(s), full_sprior: i(s), d_head: i(d) });
    let x = TkgInputs::new(&t[0], &t[1], &t[2], &t[3], &t[4], &mask);
    let launch = Launch::new().lnc(lnc).precision(precision);
    let secs = best_of(reps, || cfg.launch(&launch, &x).map(drop))?;
    Ok((secs, (bs * sa) as f64 / secs, 4.0 * (bs * h * sa * s * d) as f64 / secs / 1e9))
}

/// Times warm jitted JAX attention on `[bs, s, 1, d]` fp32 inputs: prints the
/// best of `reps` seconds.
const JAX_TIMER: &str = r#"
import sys, time
import numpy as np, jax
bs, s, d, causal, reps = (int(a) for a in sys.argv[1:])
x = [jax.numpy.asarray(np.random.default_rng(i).random((bs, s, 1, d), dtype=np.float32)) for i in range(3)]
f = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=bool(causal)))
f(*x).block_until_ready()
best = float("inf")
for _ in range(reps):
    t = time.perf_counter(); f(*x).block_until_ready(); best = min(best, time.perf_counter() - t)
print(best)
"#;

/// Times NumPy's float32 `n × n` by `n × n` matmul: prints the best of
/// `reps` seconds.
const SGEMM_TIMER: &str = r#"
import sys, time
import numpy as np
n, reps = (int(a) for a in sys.argv[1:])
rng = np.random.default_rng(0)
a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
a @ b
best = float("inf")
for _ in range(reps):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
print(best)
"#;

/// The seconds a timing `script` run by `python` with `args` prints (`flag`
/// names the option that gave the interpreter, for the error).
fn time_python(flag: &str, python: &Path, script: &str, args: &[usize]) -> Result<f64, String> {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args.iter().map(|v| v.to_string()))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{flag} {}: {e}", python.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().parse::<f64>() {
        Ok(secs) if out.status.success() => Ok(secs),
        _ => Err(format!("{flag} {}: the timing failed ({})", python.display(), out.status)),
    }
}

/// Best-of-`reps` seconds of JAX attention run by `python`.
fn time_jax(python: &Path, [bs, s, d]: [usize; 3], causal: bool, reps: u32) -> Result<f64, String> {
    time_python("--jax", python, JAX_TIMER, &[bs, s, d, usize::from(causal), reps as usize])
}

/// The order of the SGEMM timed beside the prefill table.
const SGEMM_N: usize = 2048;

/// The SGEMM runs timed (the fastest kept) after each round of the prefill cases.
const SGEMM_REPS: usize = 3;

/// The seconds of NumPy's float32 `SGEMM_N`-cubed matmul, the best of `reps`.
fn sgemm_secs(python: &Path, reps: usize) -> Result<f64, String> {
    time_python("--numpy", python, SGEMM_TIMER, &[SGEMM_N, reps])
}

/// Whole `nki run attention-cte` processes (start, reading the inputs, the
/// kernel, writing the output to a new file) on `bs × s × d` fp32 inputs: on one
/// thread (`--lnc 1 --threads 1`) and with the defaults (the target's LNC, every
/// core), taking turns.
fn whole_process(args: &BenchArgs, reps: u32) -> Result<(), String> {
    let [bs, s, d] = if args.quick { [2, 1024, 128] } else { [8, 2048, 128] };
    let exe = std::env::current_exe().map_err(|e| format!("locating the nki binary: {e}"))?;
    let dir = std::env::temp_dir().join(format!("nki-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = (|| {
        let mut files = Vec::new();
        for (name, shape, seed) in [("q", [bs, s, d], 1), ("k", [bs, d, s], 2), ("v", [bs, s, d], 3)] {
            let path = dir.join(format!("{name}.npy"));
            let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            write_tensor_npy(file, &inputs(&shape, seed, Dtype::F32)).map_err(|e| e.to_string())?;
            files.push(path);
        }
        let scale = (1.0 / (d as f64).sqrt()).to_string();
        let out = dir.join("o.npy");
        let command = |causal: bool, extra: &[&str]| {
            let mut cmd = Command::new(&exe);
            cmd.args(["run", "attention-cte", "--precision", "fp32", "--scale", &scale]).args(extra).stdout(Stdio::null());
            for (flag, path) in ["--q", "--k", "--v", "--out"].iter().zip(files.iter().chain([&out])) {
                cmd.arg(flag).arg(path);
            }
            if !causal {
                cmd.arg("--no-causal");
            }
            move || match cmd.status() {
                Ok(st) if st.success() => Ok(()),
                st => Err(format!("the benchmarked `nki run` must succeed: {st:?}")),
            }
        };
        // Each run writes a new file: the previous run's output is removed
        // before the clock starts, so freeing it is not part of the run.
        let remove_previous = || match std::fs::remove_file(&out) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("{}: {e}", out.display())),
            _ => Ok(()),
        };
        outln!(
            "whole `nki run attention-cte` processes, {bs} x {s} x {d}, fp32, best of {reps} ({} threads available)",
            Launch::new().thread_budget()
        );
        outln!("{:<8} {:>12} {:>12} {:>8} {:>9} {:>8}", "mask", "1 thread", "default", "speedup", "JAX", "vs JAX");
        let mut emulator = Vec::new();
        for causal in [false, true] {
            let one_thread = command(causal, &["--lnc", "1", "--threads", "1"]);
            emulator.push((causal, best_of_each(reps, remove_previous, [one_thread, command(causal, &[])])?));
        }
        // JAX runs last: its multi-threaded burst can leave the machine slower
        // for a few seconds (seen on virtual machines), which would fall on the
        // multi-threaded runs only.
        for (causal, [one, default]) in emulator {
            let jax = args.jax.as_deref().map(|py| time_jax(py, [bs, s, d], causal, reps)).transpose()?;
            let (jax_s, vs) = jax.map_or(("-".to_string(), "-".to_string()), |j| (format!("{j:.3}"), format!("{:.2}", j / default)));
            let mask = if causal { "causal" } else { "full" };
            outln!("{mask:<8} {one:>12.3} {default:>12.3} {:>8.2} {jax_s:>9} {vs:>8}", one / default);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Seconds of a `w`-rank striped causal ring forward over `st` tokens and of one
/// worker's causal `attention_cte` over the same tokens, both in fp32 mode.
fn time_ring(bh: usize, st: usize, d: usize, w: usize, lnc: usize, reps: u32) -> Result<(f64, f64), String> {
    let scale = 1.0 / (d as f64).sqrt();
    let global = |seed| inputs(&[1, bh, st, d], seed, Dtype::F32);
    let err = |e: nki::NkiError| e.to_string();
    let (q, k, v) = (global(4), global(5), global(6));
    let (qs, ks, vs) = (
        shard(&q, w, SeqLayout::Striped, true).map_err(err)?,
        shard(&k, w, SeqLayout::Striped, true).map_err(err)?,
        shard(&v, w, SeqLayout::Striped, false).map_err(err)?,
    );
    // The inputs are random: reading them as pre-scaled leaves the work unchanged.
    let ring_inputs = RingFwdInputs { q: Queries::Prescaled { q: &qs, scale }, k: &ks, v: &vs, sinks: None, segment_ids: None, bias: None };
    let ring = RingFwdConfig::new(w as i64).causal(true).striped(true);
    let ring_launch = Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32);
    let ring_secs = best_of(reps, || ring.launch(&ring_launch, &ring_inputs).map(drop))?;
    let (q1, k1, v1) = (inputs(&[bh, st, d], 7, Dtype::F32), inputs(&[bh, d, st], 8, Dtype::F32), inputs(&[bh, st, d], 9, Dtype::F32));
    let single = CteConfig::new().scale(scale).causal_mask(true);
    let single_launch = Launch::new().lnc(lnc).precision(Precision::Fp32);
    let single_secs = best_of(reps, || single.launch(&single_launch, &CteInputs::new(&q1, &k1, &v1)).map(drop))?;
    Ok((ring_secs, single_secs))
}

/// One timed ring forward: the fastest seconds and the collectives of the last run.
struct RingRun {
    secs: f64,
    transfer_steps: usize,
    bytes_per_step: usize,
}

/// Times a causal ring forward of `cfg` (fp32) on `[1, h, st, d]` queries and
/// `[1, h_kv, st, d]` keys and values split in `cfg`'s layout.
fn time_ring_cfg(cfg: RingFwdConfig, dims: [usize; 4], h_kv: usize, lnc: usize, reps: u32) -> Result<RingRun, String> {
    let [h, st, d, w] = dims;
    let err = |e: nki::NkiError| e.to_string();
    let layout = cfg.seq_layout();
    let (q, k, v) =
        (inputs(&[1, h, st, d], 4, Dtype::F32), inputs(&[1, h_kv, st, d], 5, Dtype::F32), inputs(&[1, h_kv, st, d], 6, Dtype::F32));
    let (qs, ks, vs) =
        (shard(&q, w, layout, true).map_err(err)?, shard(&k, w, layout, true).map_err(err)?, shard(&v, w, layout, false).map_err(err)?);
    let scale = cfg.scale_for(d);
    // The inputs are random: reading them as pre-scaled leaves the work unchanged.
    let ring_inputs = RingFwdInputs { q: Queries::Prescaled { q: &qs, scale }, k: &ks, v: &vs, sinks: None, segment_ids: None, bias: None };
    let launch = Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32);
    let last = std::cell::RefCell::new(Vec::new());
    let secs = best_of(reps, || {
        *last.borrow_mut() = cfg.launch(&launch, &ring_inputs)?.comm;
        Ok(())
    })?;
    let comm = last.into_inner();
    // Each transfer step permutes K and V.
    let transfer_steps = comm.len() / 2;
    let bytes_per_step = comm.iter().map(|e| e.bytes).sum::<usize>() / transfer_steps.max(1);
    Ok(RingRun { secs, transfer_steps, bytes_per_step })
}

/// Visible FLOPs of causal attention over `st` tokens per head (QKᵀ and PV on the
/// visible scores), with a window of `window` earlier tokens when given.
fn causal_flops(h: usize, st: usize, d: usize, window: Option<usize>) -> f64 {
    let visible: usize = (0..st).map(|i| i.min(window.unwrap_or(st)) + 1).sum();
    4.0 * (h * visible * d) as f64
}

/// The ring with grouped-query attention and a causal window against the plain
/// ring, and the causal zigzag layout against striped, per visible FLOP.
fn ring_features(st: usize, lnc: usize, reps: u32) -> Result<(), String> {
    let (h, d, w, window) = (8usize, 128usize, 4usize, st / 8);
    let dims = [h, st, d, w];
    let base = RingFwdConfig::new(w as i64).causal(true);
    outln!("ring_attention_spmd_fwd features, h {h} x S_total {st} x d {d}, {w} workers, causal, fp32, LNC{lnc}, best of {reps}");
    outln!("{:<34} {:>9} {:>10} {:>12} {:>9}", "case", "seconds", "transfers", "bytes/step", "GFLOP/s");
    let row = |name: &str, r: &RingRun, flops: f64| {
        outln!("{:<34} {:>9.3} {:>10} {:>12} {:>9.1}", name, r.secs, r.transfer_steps, r.bytes_per_step, flops / r.secs / 1e9);
    };
    let mha = time_ring_cfg(base, dims, h, lnc, reps)?;
    row("MHA, contiguous", &mha, causal_flops(h, st, d, None));
    let gqa = time_ring_cfg(base.kv_heads(1), dims, 1, lnc, reps)?;
    row("GQA 8:1, contiguous", &gqa, causal_flops(h, st, d, None));
    let windowed = time_ring_cfg(base.kv_heads(1).sliding_window(window as i64, 0), dims, 1, lnc, reps)?;
    row(&format!("GQA 8:1, window {window}, contiguous"), &windowed, causal_flops(h, st, d, Some(window)));
    let striped = time_ring_cfg(base.layout(SeqLayout::Striped), dims, h, lnc, reps)?;
    row("MHA, striped", &striped, causal_flops(h, st, d, None));
    let zigzag = time_ring_cfg(base.layout(SeqLayout::Zigzag), dims, h, lnc, reps)?;
    row("MHA, zigzag", &zigzag, causal_flops(h, st, d, None));
    // Both layouts see the same causal scores, so time per visible FLOP is time.
    outln!("zigzag / striped time per visible FLOP: {:.3}", zigzag.secs / striped.secs);
    Ok(())
}

/// The CPU as `/proc/cpuinfo` names it, with its family and model (the same
/// name covers several generations), or the architecture where there is no
/// such file.
fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field =
        |key: &str| info.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim().to_string()));
    match (field("model name"), field("cpu family"), field("model")) {
        (Some(name), Some(family), Some(model)) => format!("{name} (family {family}, model {model})"),
        (Some(name), ..) => name,
        _ => std::env::consts::ARCH.to_string(),
    }
}

/// Runs the benchmark tables (those of `--only`, else all), after a line
/// naming the machine: the figures depend on the CPU and its matmul kernel.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let lnc = usize::from(args.lnc);
    let reps = if args.quick { 1 } else { args.reps };
    let wanted = |t: Table| args.only.is_empty() || args.only.contains(&t);
    outln!("machine: {}, {} threads, matmul kernel {}", cpu(), Launch::new().thread_budget(), nki::numeric::matmul_kernel());
    if wanted(Table::Prefill) {
        outln!();
        prefill(args.quick, lnc, reps, &args.numpy)?;
    }
    if wanted(Table::Decode) {
        outln!();
        decode(args.quick, lnc, reps)?;
    }
    if wanted(Table::Process) {
        outln!();
        // A whole process is short and its start, I/O and page faults make it
        // noisier than a launch: three times the runs.
        whole_process(args, reps.saturating_mul(3))?;
    }
    if wanted(Table::Ring) {
        outln!();
        let (bh, st, d, w) = if args.quick { (2, 2048, 128, 4) } else { (4, 16384, 128, 4) };
        let (ring, single) = time_ring(bh, st, d, w, lnc, reps)?;
        outln!("ring_attention_spmd_fwd over {w} workers vs one worker's attention_cte, causal, fp32, LNC{lnc}, best of {reps}");
        outln!("{:<24} {:>12} {:>14} {:>7}", "b·h x S_total x d", "ring (s)", "one worker (s)", "ratio");
        outln!("{:<24} {:>12.3} {:>14.3} {:>7.2}", format!("{bh} x {st} x {d}"), ring, single, ring / single);
    }
    if wanted(Table::RingFeatures) {
        outln!();
        ring_features(if args.quick { 2048 } else { 16384 }, lnc, reps)?;
    }
    if wanted(Table::Layer) {
        outln!();
        layer(reps)?;
    }
    if wanted(Table::Moe) {
        outln!();
        moe_step(reps)?;
    }
    Ok(())
}

/// The decoder layer table: its kernels' emulator time per prompt and per
/// decode token, the fastest of `reps` runs in each precision mode.
fn layer(reps: u32) -> Result<(), String> {
    outln!("decoder layer (nki demo): {}, LNC2, best of {reps}", layer::describe());
    outln!("{:<10} {:>11} {:>16} {:>15}", "precision", "prefill (s)", "prefill tokens/s", "decode tokens/s");
    for (dtype, precision) in [(Dtype::F32, Precision::Fp32), (Dtype::Bf16, Precision::Hardware)] {
        let (mut prefill, mut decode) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..reps {
            let run = layer::run(dtype, precision, false).map_err(|e| e.to_string())?;
            within_bounds("decoder layer", precision, &run.checks)?;
            prefill = prefill.min(run.prefill_secs);
            decode = decode.min(run.decode_secs);
        }
        let (p, steps) = (layer::PROMPT as f64, layer::STEPS as f64);
        outln!("{:<10} {prefill:>11.3} {:>16.0} {:>15.1}", precision.to_string(), p / prefill, steps / decode);
    }
    Ok(())
}

/// An error naming the first of `checks` (of `what` in `precision`) off by
/// more than its bound: a timed run must also be right.
fn within_bounds(what: &str, precision: Precision, checks: &[layer::Checked]) -> Result<(), String> {
    match checks.iter().find(|c| c.err > c.bound) {
        Some(c) => Err(format!("{what}, {precision}: {} is off by {:.3e} (bound {:.3e})", c.what, c.err, c.bound)),
        None => Ok(()),
    }
}

/// The MoE step table: its kernels' emulator time per decode step, the
/// fastest of `reps` runs in each precision mode.
fn moe_step(reps: u32) -> Result<(), String> {
    outln!("MoE decode step (nki demo): {}, LNC2, best of {reps}", moe::describe(&moe::DIMS));
    outln!("{:<10} {:>11} {:>15}", "precision", "step (s)", "decode tokens/s");
    for (dtype, precision) in [(Dtype::F32, Precision::Fp32), (Dtype::Bf16, Precision::Hardware)] {
        let mut secs = f64::INFINITY;
        for _ in 0..reps {
            let run = moe::run(&moe::DIMS, dtype, precision, false).map_err(|e| e.to_string())?;
            within_bounds("MoE step", precision, &run.checks)?;
            secs = secs.min(run.secs);
        }
        outln!("{:<10} {secs:>11.3} {:>15.1}", precision.to_string(), moe::TOKENS as f64 / secs);
    }
    Ok(())
}

/// `nc_matmul`'s shape in the one-thread matmul line: the largest stationary
/// (128 × 128) and moving (128 × 512) tiles, i.e. `attention_cte`'s `Q·Kᵀ`.
const MATMUL_SHAPE: [usize; 3] = [128, 128, 512];
/// Matmuls per timed launch of that line.
const MATMUL_COUNT: usize = 64;

/// The seconds of [`MATMUL_COUNT`] fp32 `nc_matmul`s of [`MATMUL_SHAPE`]
/// accumulating into one PSUM tile, in a launch of one program on one thread:
/// the emulator's matmul instruction rate, the ceiling of a kernel made of it.
fn matmul_secs() -> Result<f64, String> {
    let [m, k, n] = MATMUL_SHAPE;
    let launch = Launch::new().threads(1).precision(Precision::Fp32);
    let tile = |ctx: &nki::Ctx, shape: [usize; 2], buffer: Buffer, seed: u64| {
        let t = nl::ndarray(ctx, &shape.map(|x| x as i64), Dtype::F32, nl::NdarrayOpts { buffer: Some(buffer), ..Default::default() })?;
        if buffer == Buffer::Sbuf {
            t.fill_from_f32(&inputs(&shape, seed, Dtype::F32).to_f32_vec())?;
        }
        Ok::<_, nki::NkiError>(t)
    };
    launch
        .run(|ctx| {
            let (stationary, moving) = (tile(ctx, [k, m], Buffer::Sbuf, 1)?, tile(ctx, [k, n], Buffer::Sbuf, 2)?);
            let psum = tile(ctx, [m, n], Buffer::Psum, 0)?;
            let start = Instant::now();
            for _ in 0..MATMUL_COUNT {
                nisa::nc_matmul(ctx, &psum, &stationary, &moving, Default::default())?;
            }
            Ok(start.elapsed().as_secs_f64())
        })
        .map_err(|e| e.to_string())
}

/// The `attention_cte` launch table, each rate beside NumPy's SGEMM rate
/// measured after the launches (its multi-threaded BLAS burst could slow the
/// machine for the runs after it).
fn prefill(quick: bool, lnc: usize, reps: u32, numpy: &Path) -> Result<(), String> {
    let shapes: &[[usize; 3]] = if quick { &[[2, 1024, 128]] } else { &[[8, 2048, 128], [2, 8192, 128]] };
    let cases: Vec<CteCase> = shapes
        .iter()
        .flat_map(|&shape| {
            [false, true].into_iter().flat_map(move |causal| [Precision::Fp32, Precision::Hardware].map(|p| (shape, causal, p)))
        })
        .map(|(shape, causal, precision)| CteCase::new(shape, causal, precision, lnc))
        .collect();
    let launches: Vec<Launch> = cases.iter().map(CteCase::base_launch).collect();
    // Rounds of every case, then NumPy's SGEMM: a slow spell of the machine
    // falls on the kernel and on the SGEMM it is compared with alike.
    let mut secs = vec![f64::INFINITY; cases.len()];
    let (mut sgemm, mut matmul) = (Ok(f64::INFINITY), f64::INFINITY);
    for _ in 0..reps {
        for ((best, case), launch) in secs.iter_mut().zip(&cases).zip(&launches) {
            let start = Instant::now();
            case.launch(launch)?;
            *best = best.min(start.elapsed().as_secs_f64());
        }
        matmul = matmul.min(matmul_secs()?);
        if let Ok(best) = &sgemm {
            sgemm = sgemm_secs(numpy, SGEMM_REPS).map(|s| s.min(*best));
        }
    }
    let sgemm = sgemm.map(|secs| 2.0 * (SGEMM_N as f64).powi(3) / secs / 1e9);
    outln!("attention_cte emulator throughput, LNC{lnc}, best of {reps} ({} threads available)", Launch::new().thread_budget());
    match &sgemm {
        Ok(g) => {
            outln!("NumPy SGEMM ({SGEMM_N}^3 float32, best of {SGEMM_REPS} after each of the {reps} rounds of the cases): {g:.1} GFLOP/s")
        }
        Err(e) => outln!("NumPy SGEMM not measured ({e}; pass --numpy PYTHON)"),
    }
    let [m, k, n] = MATMUL_SHAPE;
    let matmul = 2.0 * (m * k * n * MATMUL_COUNT) as f64 / matmul / 1e9;
    // The launches above keep their whole thread budget busy (LNC1 through
    // helper threads), so the kernel's ceiling is all of it at the one-thread rate.
    let threads = launches.first().map_or(1, Launch::thread_budget);
    let ceiling = sgemm
        .as_ref()
        .map_or(String::new(), |g| format!("; {threads} threads at this rate: {:.0}% of SGEMM", 100.0 * threads as f64 * matmul / g));
    outln!("nc_matmul {m} x {k} x {n} float32 on one thread (best of {reps}): {matmul:.1} GFLOP/s{ceiling}");
    // GFLOP/s counts the attention's visible work; "issued" the kernel's matmuls.
    outln!(
        "{:<24} {:<8} {:<10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "bs·h x S x d",
        "mask",
        "precision",
        "seconds",
        "GFLOP/s",
        "÷ SGEMM",
        "issued",
        "÷ SGEMM"
    );
    for (case, secs) in cases.iter().zip(secs) {
        let share = |rate: f64| sgemm.as_ref().map_or("-".to_string(), |g| format!("{:.0}%", 100.0 * rate / g));
        let (gflops, issued) = (case.flops() / secs / 1e9, case.issued_flops()? / secs / 1e9);
        let [bs, s, d] = case.shape;
        outln!(
            "{:<24} {:<8} {:<10} {secs:>9.3} {gflops:>9.1} {:>9} {issued:>9.1} {:>9}",
            format!("{bs} x {s} x {d}"),
            if case.causal { "causal" } else { "full" },
            case.precision.to_string(),
            share(gflops),
            share(issued)
        );
    }
    Ok(())
}

/// The `attention_tkg` decode table.
fn decode(quick: bool, lnc: usize, reps: u32) -> Result<(), String> {
    let (bs, kv, d) = if quick { (8, 1024, 128) } else { (8, 8192, 128) };
    outln!("attention_tkg decode, {DECODE_HEADS} query heads on one KV head, {DECODE_TOKENS} token per step, LNC{lnc}, best of {reps}");
    outln!("{:<24} {:<10} {:>9} {:>9} {:>9}", "bs x KV length x d", "precision", "seconds", "tokens/s", "GFLOP/s");
    for precision in [Precision::Fp32, Precision::Hardware] {
        let (secs, tokens, gflops) = time_tkg(bs, kv, d, precision, lnc, reps)?;
        outln!("{:<24} {:<10} {:>9.4} {:>9.0} {:>9.1}", format!("{bs} x {kv} x {d}"), precision.to_string(), secs, tokens, gflops);
    }
    Ok(())
}
