//! Shared test support: deterministic inputs, error metrics, and the NumPy
//! execution of emitted kernels through the Python harness.
#![allow(dead_code)]
pub mod attention;
pub mod attention_grad;
pub mod ring;
pub mod tkg;

use nki::io::npy::{NpyType, read_npy, write_npy};
use nki::{Dtype, Tensor};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// Linking the example kernels registers them, so `nki::registry()` (the
// emitted package, the snapshots) holds them beside the attention kernels.
use nki_examples as _;

/// Deterministic uniform values in `[lo, hi)` (a 64-bit LCG; independent of the code under test).
pub fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

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

/// Runs `python -m nki_harness <args>`; returns (success, stdout, stderr).
pub fn harness(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(python())
        .args(["-m", "nki_harness"])
        .args(args)
        .env("PYTHONPATH", repo_root().join("tests/python"))
        .output()
        .expect("running the Python harness");
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

/// A kernel argument for the NumPy run.
pub enum Arg {
    /// An HBM tensor: values and dtype.
    Tensor(Vec<usize>, Vec<f64>, Dtype),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A member of a Python `Enum` class the package exports: class, member.
    Member(&'static str, &'static str),
}

/// Runs the emitted `kernel` under the NumPy executor with one rank, `lnc`
/// programs and `precision`, and returns its outputs' values.
pub fn run_numpy(kernel: &str, args: &[Arg], lnc: usize, precision: &str) -> Vec<Vec<f32>> {
    let mut ranks =
        run_numpy_ranks(emitted_package(), kernel, std::slice::from_ref(&args.iter().map(Arg::clone_arg).collect()), lnc, precision);
    ranks.swap_remove(0)
}

impl Arg {
    pub fn clone_arg(&self) -> Arg {
        match self {
            Arg::Tensor(s, v, d) => Arg::Tensor(s.clone(), v.clone(), *d),
            Arg::Int(v) => Arg::Int(*v),
            Arg::Float(v) => Arg::Float(*v),
            Arg::Bool(v) => Arg::Bool(*v),
            Arg::Member(c, m) => Arg::Member(c, m),
        }
    }
}

/// Runs `kernel` of the emitted package `pkg` under the NumPy executor with one
/// rank per entry of `args`; returns each rank's outputs.
pub fn run_numpy_ranks(pkg: &Path, kernel: &str, args: &[Vec<Arg>], lnc: usize, precision: &str) -> Vec<Vec<Vec<f32>>> {
    try_run_numpy_ranks(pkg, kernel, args, lnc, precision).unwrap_or_else(|e| panic!("{e}"))
}

/// [`run_numpy_ranks`], with a failed run as `Err` holding the harness's output.
pub fn try_run_numpy_ranks(pkg: &Path, kernel: &str, args: &[Vec<Arg>], lnc: usize, precision: &str) -> Result<Vec<Vec<Vec<f32>>>, String> {
    try_run_numpy_ranks_on(pkg, kernel, args, lnc, precision, "trn2")
}

/// [`try_run_numpy_ranks`] on the NeuronCore `generation` (`trn1`, `trn2`, `trn3`).
pub fn try_run_numpy_ranks_on(
    pkg: &Path,
    kernel: &str,
    args: &[Vec<Arg>],
    lnc: usize,
    precision: &str,
    generation: &str,
) -> Result<Vec<Vec<Vec<f32>>>, String> {
    let outs = try_run_numpy_on(pkg, kernel, args, lnc, precision, generation)?;
    Ok(outs.into_iter().map(|rank| rank.into_iter().map(|o| o.iter().map(|&v| v as f32).collect()).collect()).collect())
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
    let dir = scratch(&format!("np_{kernel}"));
    let mut ranks_json = Vec::new();
    for (r, rank_args) in args.iter().enumerate() {
        let mut json_args = Vec::new();
        for (i, a) in rank_args.iter().enumerate() {
            json_args.push(match a {
                Arg::Tensor(shape, vals, dtype) => {
                    let p = dir.join(format!("in{r}_{i}.npy"));
                    write_npy(&p, shape, &as_dtype(vals, *dtype), NpyType::F64).expect("writing an input");
                    format!("{{\"npy\": \"{}\", \"dtype\": \"{}\"}}", p.display(), dtype.nl_name())
                }
                Arg::Int(v) => format!("{{\"int\": {v}}}"),
                Arg::Float(v) => format!("{{\"float\": {v:?}}}"),
                Arg::Bool(b) => format!("{{\"bool\": {b}}}"),
                Arg::Member(class, member) => format!("{{\"enum\": \"{class}\", \"member\": \"{member}\"}}"),
            });
        }
        ranks_json.push(format!("[{}]", json_args.join(", ")));
    }
    let spec = format!(
        "{{\"kernel\": \"{kernel}\", \"lnc\": {lnc}, \"ranks\": {}, \"precision\": \"{precision}\", \"generation\": \"{generation}\", \"args\": [{}]}}",
        args.len(),
        ranks_json.join(", ")
    );
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec).expect("writing the spec");
    let out_dir = dir.join("out");
    let pkg = pkg.display().to_string();
    let (ok, stdout, stderr) =
        harness(&["run", "--package", &pkg, "--spec", &spec_path.display().to_string(), "--out", &out_dir.display().to_string()]);
    if !ok {
        return Err(format!("NumPy run of {kernel} failed:\n{stdout}\n{stderr}"));
    }
    Ok((0..args.len())
        .map(|r| {
            let mut outs = Vec::new();
            for i in 0.. {
                let p = out_dir.join(format!("rank{r}_out{i}.npy"));
                if !p.exists() {
                    break;
                }
                outs.push(read_npy(&p).expect("reading an output").data);
            }
            assert!(!outs.is_empty(), "the NumPy run of {kernel} wrote no outputs for rank {r}");
            outs
        })
        .collect())
}
