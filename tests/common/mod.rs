//! Shared test support: deterministic inputs, error metrics, and the NumPy
//! execution of emitted kernels through the Python harness.
#![allow(dead_code)]
pub mod attention;
pub mod attention_grad;
#[path = "../../nki-core/tests/common/lcg.rs"]
mod lcg;
pub mod ring;
pub mod ring_features;
mod serve;
pub mod sweep;
pub mod tkg;
pub mod tkg_features;
#[path = "../../nki-core/tests/common/xorwow.rs"]
pub mod xorwow;

pub use lcg::uniform;

use nki::io::npy::{NpyType, read_npy, write_npy};
use nki::{Dtype, Precision, Tensor};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// Linking the example and library kernels registers them, so `nki::registry()`
// (the emitted package, the snapshots) holds them beside the attention kernels.
use nki_examples as _;
use nkilib as _;

/// Test binaries that run on [`nki::cli::Allocator`] (the allocator of
/// `nki::main!()` binaries) keep freed memory as those binaries do, from
/// before the first test allocates: with mimalloc's purging on, every launch
/// faulted its tiles in again (the nkilib tests on 2 vCPUs: 340 s, 104 s of
/// it in the kernel, against 296 s and 25 s).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static TUNE_ALLOCATOR: extern "C" fn() = {
    extern "C" fn tune() {
        nki::cli::tune_allocator();
    }
    tune
};

/// The fp32 metric (the NKI tests'): `max|a-b| <= FP32_RTOL·max|ref| + FP32_ATOL`.
pub const FP32_RTOL: f64 = 1e-5;
/// See [`FP32_RTOL`].
pub const FP32_ATOL: f64 = 1e-6;

/// A test case named by its `Debug` form, which lists every field, so that
/// a failure says which configuration broke and [`seed_of`] gives each case
/// its own inputs.
pub trait CaseName: std::fmt::Debug {
    /// The case's `Debug` form.
    fn name(&self) -> String {
        format!("{self:?}")
    }
}

impl<T: std::fmt::Debug> CaseName for T {}

/// A seed derived from a case's name (FNV-1a), so every case draws its own inputs.
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// `values` rounded to `dtype` and widened back, as the device would hold them.
pub fn as_dtype(values: &[f64], dtype: Dtype) -> Vec<f64> {
    values.iter().map(|&v| f64::from(nki::dtype::round_f32(dtype, v as f32))).collect()
}

/// A shared-HBM tensor of `dtype` holding `values`.
pub fn tensor(shape: &[usize], values: &[f64], dtype: Dtype) -> Tensor {
    let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
    Tensor::from_f32(shape, &v, dtype).expect("shape matches values")
}

/// `C = alpha·A·B + beta·C` for strided row-major-or-not `A` (`m×k`), `B` (`k×n`), `C` (`m×n`).
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    (m, k, n): (usize, usize, usize),
    alpha: f64,
    a: &[f64],
    (rsa, csa): (usize, usize),
    b: &[f64],
    (rsb, csb): (usize, usize),
    beta: f64,
    c: &mut [f64],
    rsc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    // Every index the strides reach must lie inside the slices.
    assert!(k == 0 || (m - 1) * rsa + (k - 1) * csa < a.len(), "A out of bounds");
    assert!(k == 0 || (k - 1) * rsb + (n - 1) * csb < b.len(), "B out of bounds");
    assert!((m - 1) * rsc + n - 1 < c.len(), "C out of bounds");
    // SAFETY: the asserts above keep every access inside `a`, `b` and `c`, and `c`
    // is borrowed mutably so it aliases neither input.
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            rsc as isize,
            1,
        );
    }
}

/// `a · b` in float64, for row-major `a` `[m, k]` and `b` `[k, n]`: `[m, n]`.
pub fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    assert_eq!((a.len(), b.len()), (m * k, k * n), "a is [{m}, {k}], b [{k}, {n}]");
    let mut c = vec![0.0; m * n];
    gemm((m, k, n), 1.0, a, (k, 1), b, (n, 1), 0.0, &mut c, n);
    c
}

/// `a_tᵀ · b` in float64, for row-major `a_t` `[k, m]` and `b` `[k, n]`: `[m, n]`.
pub fn matmul_t(a_t: &[f64], b: &[f64], k: usize, m: usize, n: usize) -> Vec<f64> {
    assert_eq!((a_t.len(), b.len()), (k * m, k * n), "a_t is [{k}, {m}], b [{k}, {n}]");
    let mut c = vec![0.0; m * n];
    gemm((m, k, n), 1.0, a_t, (1, m), b, (n, 1), 0.0, &mut c, n);
    c
}

/// `x · w` in float64, for `x` `[k]` and row-major `w` `[k, n]`: `[n]`. The
/// rows of `w` are read in memory order (one row times one value at a time),
/// each column's sum adding its terms in row order.
pub fn vec_mat(x: &[f64], w: &[f64]) -> Vec<f64> {
    assert!(!x.is_empty() && !w.is_empty() && w.len().is_multiple_of(x.len()), "w is [{}, n], n > 0", x.len());
    let mut out = vec![0.0; w.len() / x.len()];
    for (a, row) in x.iter().zip(w.chunks(out.len())) {
        out.iter_mut().zip(row).for_each(|(o, b)| *o += a * b);
    }
    out
}

/// `max |got - want|` and `max |want|`.
pub fn errors(got: &[f32], want: &[f64]) -> (f64, f64) {
    assert_eq!(got.len(), want.len(), "result has {} values, reference {}", got.len(), want.len());
    let err = got.iter().zip(want).map(|(&g, &w)| (f64::from(g) - w).abs()).fold(0.0, f64::max);
    let scale = want.iter().map(|w| w.abs()).fold(0.0, f64::max);
    assert!(got.iter().all(|g| g.is_finite()), "result has non-finite values");
    (err, scale)
}

/// Asserts `max |got - want| <= atol + rtol * max |want|` (the NKI test metric).
pub fn assert_close(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    let (err, scale) = errors(got, want);
    let bound = atol + rtol * scale;
    assert!(err <= bound, "{what}: max abs error {err:.3e} > {bound:.3e} (atol {atol:e} + rtol {rtol:e} x max|ref| {scale:.3e})");
}

/// Asserts every element of `got` within its own bound of the float64
/// `want`: `|got - want| <= atol + rtol · magnitude`, the element's
/// `magnitude` (the size of the terms it sums) as the reference returns it.
pub fn assert_close_per_element(what: &str, got: &[f32], (want, magnitude): (&[f64], &[f64]), atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: result has {} values, reference {}", got.len(), want.len());
    for (at, ((g, w), m)) in got.iter().zip(want).zip(magnitude).enumerate() {
        let err = (f64::from(*g) - w).abs();
        assert!(err <= atol + rtol * m, "{what} element {at}: {g} vs {w} (magnitude {m})");
    }
}

/// Asserts that `violation`, a kernel's rules as a `const fn`, refuses each
/// call of `cases` by the rule it is paired with (the first it breaks).
pub fn assert_refused_by<C: Copy + std::fmt::Debug, R: PartialEq + std::fmt::Debug>(
    violation: impl Fn(C) -> Option<R>,
    cases: impl IntoIterator<Item = (C, R)>,
) {
    for (call, rule) in cases {
        assert_eq!(violation(call), Some(rule), "{call:?}");
    }
}

/// Asserts that the NumPy executor's outputs `numpy` of the emitted kernel
/// (case `what`, run in `mode`, `"fp32"` or `"hardware"`) equal the
/// emulator's up to the order of the matmuls' float32 sums: as many outputs,
/// each within `1e-6 + rtol · max|emulator|`, `rtol` 1e-5 in fp32 and one
/// bfloat16 step (2^-7) in hardware precision.
pub fn assert_numpy_close_to_emulator<E: AsRef<[f32]>>(what: &str, mode: &str, numpy: &[Vec<f32>], emulator: &[E]) {
    assert_eq!(numpy.len(), emulator.len(), "{what} {mode}: outputs");
    let rtol = if mode == "fp32" { 1e-5 } else { 2f64.powi(-7) };
    for (k, (n, e)) in numpy.iter().zip(emulator).enumerate() {
        let e: Vec<f64> = e.as_ref().iter().map(|&v| f64::from(v)).collect();
        assert_eq!(n.len(), e.len(), "{what} {mode}: output {k} length");
        assert_close(&format!("{what} {mode}: output {k}"), n, &e, 1e-6, rtol);
    }
}

/// The float64 RMSNorm of `row`: each element times `1 / sqrt(Σ row² / n +
/// eps)` and its `gamma` (none: 1), the mean over `n` elements (the unpadded
/// hidden size when the row carries zero padding).
pub fn rms_norm(row: &[f64], gamma: Option<&[f64]>, n: usize, eps: f64) -> Vec<f64> {
    let r = 1.0 / (row.iter().map(|a| a * a).sum::<f64>() / n as f64 + eps).sqrt();
    row.iter().enumerate().map(|(k, a)| a * r * gamma.map_or(1.0, |g| g[k])).collect()
}

/// The float64 LayerNorm of `row`: `(row - mean) · gamma / sqrt(var + eps)`,
/// plus `beta` when given, the mean and variance over the whole row.
pub fn layer_norm(row: &[f64], gamma: &[f64], beta: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let h = row.len() as f64;
    let mean = row.iter().sum::<f64>() / h;
    let var = row.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / h;
    let r = 1.0 / (var + eps).sqrt();
    row.iter().enumerate().map(|(k, a)| (a - mean) * gamma[k] * r + beta.map_or(0.0, |b| b[k])).collect()
}

/// Packed documents of uneven lengths (ids in order) for the keys; the queries
/// share them except for a run of tokens whose id no key has, so some rows see
/// no key at all (zeros and LSE -inf, or only the sink); the second batch's ids
/// are shuffled, so a document is not one interval.
pub fn packed_segment_ids(batch: usize, s: usize, seed: u64) -> (Vec<i32>, Vec<i32>) {
    let mut q = Vec::with_capacity(batch * s);
    let mut kv = Vec::with_capacity(batch * s);
    for bi in 0..batch {
        let cuts = uniform(s, seed + bi as u64, 0.0, 1.0);
        let mut doc = 0;
        for (i, c) in cuts.iter().enumerate() {
            if *c < 6.0 / s as f64 {
                doc += 1;
            }
            let id = if bi % 2 == 1 { ((c * 4.0) as i32) - 2 } else { doc };
            kv.push(id);
            q.push(if (s / 3..s / 3 + 20).contains(&i) { 1000 } else { id });
        }
    }
    (q, kv)
}

/// [`assert_close`] for log-sum-exps, where a row that sees no key has `-inf`:
/// exactly those rows must be `-inf`, the others within the bound.
pub fn assert_close_lse(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: result has {} values, reference {}", got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((w == f64::NEG_INFINITY) == (g == f32::NEG_INFINITY), "{what}: row {i} is {g}, the reference {w}");
    }
    let (g, w): (Vec<f32>, Vec<f64>) = got.iter().zip(want).filter(|(_, w)| w.is_finite()).map(|(&g, &w)| (g, w)).unzip();
    assert_close(what, &g, &w, atol, rtol);
}

/// A `/proc/self/status` field in bytes (`VmRSS`, `VmHWM`).
pub fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status is readable on Linux");
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} missing from /proc/self/status"));
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("unreadable {line}"));
    kib * 1024
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python interpreter with numpy and ml_dtypes: `$NKI_PYTHON`, else the
/// project's `.venv`. Fails with the set-up command when neither exists.
pub fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let p = std::env::var_os("NKI_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".venv/bin/python"));
        assert!(
            p.exists(),
            "no Python for the NKI harness at {} — run the README's test command (it creates .venv with numpy and ml_dtypes) or set NKI_PYTHON",
            p.display()
        );
        p
    })
}

thread_local! {
    /// `Some(strict)` inside [`with_strict_uninit`] on this thread.
    static STRICT_UNINIT: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Runs `f` with the harnesses it starts (on this thread) treating reads of
/// unwritten memory as errors (`strict`) or warnings, whatever
/// `NKI_STRICT_UNINIT` the tests themselves run under.
pub fn with_strict_uninit<T>(strict: bool, f: impl FnOnce() -> T) -> T {
    let before = STRICT_UNINIT.replace(Some(strict));
    let out = f();
    STRICT_UNINIT.set(before);
    out
}

/// Runs `python -m nki_harness <args>`; returns (success, stdout, stderr).
/// The command runs on a pooled `serve` process ([`serve`]), or in a process
/// of its own when no server answers.
pub fn harness(args: &[&str]) -> (bool, String, String) {
    // The emitted package's compiled modules are cached outside it, so each
    // run after the first skips compiling them.
    let pycache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pycache");
    let pythonpath = repo_root().join("tests/python");
    let base_env = [("PYTHONPATH", pythonpath.as_path()), ("NKI_PACKAGE_PYCACHE", pycache.as_path())];
    // Inside `with_strict_uninit` the variable is set or removed; else inherited.
    let env: &[(&str, Option<&str>)] = match STRICT_UNINIT.get() {
        Some(true) => &[(nki::emulator::STRICT_UNINIT_ENV, Some("1"))],
        Some(false) => &[(nki::emulator::STRICT_UNINIT_ENV, None)],
        None => &[],
    };
    if let Some(answer) = serve::ask(python(), &base_env, args, env) {
        return answer;
    }
    let mut cmd = Command::new(python());
    cmd.args(["-m", "nki_harness"]).args(args).envs(base_env);
    for &(k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().expect("running the Python harness");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A fresh scratch directory under the target dir, one per call (tests of one
/// binary run on parallel threads, and two of them may run the same kernel).
pub fn scratch(name: &str) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch dir");
    dir
}

/// The package of every registered kernel, emitted once per test binary.
pub fn emitted_package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| package_of("nki_pkg", &nki::registry()))
}

/// Emits a package holding `kernels` (and what they call) into a scratch dir.
pub fn package_of(name: &str, kernels: &[&'static nki::emit::FunctionInfo]) -> PathBuf {
    let dir = scratch(name).join("nki_kernels");
    nki::emit::Package::new(kernels).expect("packaging").write_to(&dir).expect("writing the package");
    dir
}

/// A kernel argument for the NumPy run (positional or keyword).
#[derive(Clone, Debug)]
pub enum Arg {
    /// An HBM tensor: shape, values (rounded to the dtype when written) and dtype.
    Tensor(Vec<usize>, Vec<f64>, Dtype),
    Int(i64),
    Float(f64),
    Bool(bool),
    None,
    /// An `nl` dtype (`nl.float32`, ...).
    Dtype(Dtype),
    /// A Python tuple (e.g. replica groups: a tuple of tuples of ints).
    Tuple(Vec<Arg>),
    /// An instance of the `nl.NKIObject` class the package exports under this
    /// name, built from the fields given (the others keep their defaults).
    Object(&'static str, Vec<(&'static str, Arg)>),
    /// A member of a Python `Enum` class the package exports: class, member.
    Member(&'static str, &'static str),
    /// An `ncc.ReplicaGroup` of these rings.
    ReplicaGroup(Vec<Vec<i64>>),
}

/// Runs the emitted `kernel` under the NumPy executor with one rank, `lnc`
/// programs and `precision`, and returns its outputs' values.
pub fn run_numpy(kernel: &str, args: &[Arg], lnc: usize, precision: &str) -> Vec<Vec<f32>> {
    let mut ranks = run_numpy_ranks(emitted_package(), kernel, &[args.to_vec()], lnc, precision);
    ranks.swap_remove(0)
}

/// Runs `kernel` of the emitted package `pkg` under the NumPy executor with one
/// rank per entry of `args`; returns each rank's outputs.
pub fn run_numpy_ranks(pkg: &Path, kernel: &str, args: &[Vec<Arg>], lnc: usize, precision: &str) -> Vec<Vec<Vec<f32>>> {
    try_run_numpy_ranks(pkg, kernel, args, lnc, precision).unwrap_or_else(|e| panic!("{e}"))
}

/// [`run_numpy_ranks`], with a failed run as `Err` holding the harness's output.
pub fn try_run_numpy_ranks(pkg: &Path, kernel: &str, args: &[Vec<Arg>], lnc: usize, precision: &str) -> Result<Vec<Vec<Vec<f32>>>, String> {
    try_run_numpy_on(pkg, kernel, args, lnc, precision, "trn2").map(as_f32)
}

/// Every rank's outputs (of [`try_run_numpy_on`]) as float32 values.
pub fn as_f32(ranks: Vec<Vec<Vec<f64>>>) -> Vec<Vec<Vec<f32>>> {
    ranks.into_iter().map(|rank| rank.into_iter().map(|o| o.iter().map(|&v| v as f32).collect()).collect()).collect()
}

/// [`try_run_numpy_ranks`] on `generation` (`trn1` .. `trn3`), with the outputs'
/// exact values (uint32 ones included).
pub fn try_run_numpy_on(
    pkg: &Path,
    kernel: &str,
    args: &[Vec<Arg>],
    lnc: usize,
    precision: &str,
    generation: &str,
) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let ranks: Vec<RankArgs<'_>> = args.iter().map(|a| (a.clone(), Vec::new())).collect();
    let run = spec_run(pkg, kernel, &ranks, lnc, precision, generation);
    if !run.ok {
        return Err(format!("NumPy run of {kernel} failed:\n{}\n{}", run.stdout, run.stderr));
    }
    let outs = run.outputs(kernel, ranks.len());
    let _ = std::fs::remove_dir_all(&run.dir);
    Ok(outs)
}

/// One rank's arguments for the NumPy run: positional and keyword.
pub type RankArgs<'a> = (Vec<Arg>, Vec<(&'a str, Arg)>);

/// A finished NumPy-executor run: its scratch directory, whether it
/// succeeded, and what it printed.
pub struct SpecRun {
    pub dir: PathBuf,
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl SpecRun {
    /// Every rank's outputs (`rank{r}_out{i}.npy`, as many as the run wrote).
    pub fn outputs(&self, kernel: &str, ranks: usize) -> Vec<Vec<Vec<f64>>> {
        (0..ranks)
            .map(|r| {
                let mut outs = Vec::new();
                for i in 0.. {
                    let p = self.dir.join(format!("out/rank{r}_out{i}.npy"));
                    if !p.exists() {
                        break;
                    }
                    outs.push(read_npy(&p).expect("reading an output").data);
                }
                assert!(!outs.is_empty(), "the NumPy run of {kernel} wrote no outputs for rank {r}");
                outs
            })
            .collect()
    }
}

/// The harness's JSON for one argument; tensors are written to `dir` as
/// `in{n}.npy`, `n` counting up.
fn encode(a: &Arg, dir: &Path, n: &mut usize) -> String {
    match a {
        Arg::Tensor(shape, vals, dtype) => {
            let p = dir.join(format!("in{n}.npy"));
            *n += 1;
            // Packed MX values are 32-bit words, which f32 rounding would corrupt.
            let vals = if dtype.packs().is_some() { vals.clone() } else { as_dtype(vals, *dtype) };
            write_npy(&p, shape, &vals, NpyType::F64).expect("writing an input");
            format!("{{\"npy\": \"{}\", \"dtype\": \"{}\"}}", p.display(), dtype.nl_name())
        }
        Arg::Int(v) => format!("{{\"int\": {v}}}"),
        Arg::Float(v) => format!("{{\"float\": {v:?}}}"),
        Arg::Bool(b) => format!("{{\"bool\": {b}}}"),
        Arg::None => "{\"none\": true}".to_string(),
        Arg::Dtype(d) => format!("{{\"dtype\": \"{}\"}}", d.nl_name()),
        Arg::Tuple(items) => {
            let items: Vec<String> = items.iter().map(|i| encode(i, dir, n)).collect();
            format!("{{\"tuple\": [{}]}}", items.join(", "))
        }
        Arg::Object(class, fields) => {
            let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\": {}", encode(v, dir, n))).collect();
            format!("{{\"object\": \"{class}\", \"fields\": {{{}}}}}", fields.join(", "))
        }
        Arg::Member(class, member) => format!("{{\"enum\": \"{class}\", \"member\": \"{member}\"}}"),
        Arg::ReplicaGroup(rings) => format!("{{\"replica_group\": {rings:?}}}"),
    }
}

/// Writes the spec of `kernel` with `ranks`' arguments (one rank per entry,
/// `lnc` programs each) into a fresh scratch directory and runs it under the
/// NumPy executor on `generation`; outputs land in the directory's `out/`.
pub fn spec_run(pkg: &Path, kernel: &str, ranks: &[RankArgs<'_>], lnc: usize, precision: &str, generation: &str) -> SpecRun {
    let dir = scratch(&format!("np_{kernel}"));
    let mut n = 0usize;
    let mut positional = Vec::new();
    let mut keywords = Vec::new();
    for (args, kwargs) in ranks {
        let p: Vec<String> = args.iter().map(|a| encode(a, &dir, &mut n)).collect();
        let k: Vec<String> = kwargs.iter().map(|(k, a)| format!("\"{k}\": {}", encode(a, &dir, &mut n))).collect();
        positional.push(format!("[{}]", p.join(", ")));
        keywords.push(format!("{{{}}}", k.join(", ")));
    }
    let spec = format!(
        "{{\"kernel\": \"{kernel}\", \"lnc\": {lnc}, \"ranks\": {}, \"precision\": \"{precision}\", \"generation\": \"{generation}\", \
         \"args\": [{}], \"kwargs\": [{}]}}",
        ranks.len(),
        positional.join(", "),
        keywords.join(", ")
    );
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec).expect("writing the spec");
    let pkg = pkg.display().to_string();
    let out = dir.join("out").display().to_string();
    let (ok, stdout, stderr) = harness(&["run", "--package", &pkg, "--spec", &spec_path.display().to_string(), "--out", &out]);
    SpecRun { dir, ok, stdout, stderr }
}

/// The two precision modes an emitted kernel is run in, with the harness's
/// name for each.
pub const PRECISION_MODES: [(Precision, &str); 2] = [(Precision::Fp32, "fp32"), (Precision::Hardware, "hardware")];

/// Asserts that the NumPy executor's output equals the emulator's element for
/// element (`what` names the case, mode and output).
pub fn assert_same_elements(what: &str, numpy: &[f32], emulator: &[f32]) {
    assert_eq!(numpy.len(), emulator.len(), "{what}");
    for (k, (a, b)) in numpy.iter().zip(emulator).enumerate() {
        assert!(a == b, "{what} element {k}: numpy {a} vs emulator {b}");
    }
}

/// Runs `kernel` of `pkg` with one rank's `call` under the NumPy executor on
/// `generation`, in both precision modes, and asserts that its first output
/// equals `emulate(precision)` element for element.
pub fn assert_numpy_equals_emulator(
    pkg: &Path,
    (kernel, what): (&str, &str),
    call: RankArgs<'_>,
    lnc: usize,
    generation: &str,
    emulate: impl Fn(Precision) -> Vec<f32>,
) {
    let call = [call];
    for (precision, mode) in PRECISION_MODES {
        let emu = emulate(precision);
        let run = spec_run(pkg, kernel, &call, lnc, mode, generation);
        assert!(run.ok, "{what} {mode}: NumPy run failed:\n{}\n{}", run.stdout, run.stderr);
        let np: Vec<f32> = run.outputs(kernel, 1).swap_remove(0).swap_remove(0).into_iter().map(|v| v as f32).collect();
        assert_same_elements(&format!("{what} {mode}"), &np, &emu);
    }
}
