//! A crate of its own: `examples/user-crate` copied to a fresh directory outside
//! the workspace, depending on it by path, built with cargo, and its binary —
//! nothing but `nki::main!()` and a kernel module — driven through `list`,
//! `run`, `profile`, `emit` and `traceback`, its outputs checked against
//! float64 and the emitted package's NumPy run, a Python traceback of that run
//! mapped back to the kernel's Rust line.

use super::common::{self, Arg};
use nki::Dtype;
use nki::io::npy::{NpyType, read_npy, write_npy};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The fixture crate: the README's set-up section in files.
fn fixture() -> PathBuf {
    common::repo_root().join("examples/user-crate")
}

/// The fresh crate's binary, built once per test binary.
pub fn fresh_crate_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_fresh_crate)
}

/// Copies the fixture to a fresh directory outside the workspace (its
/// dependency on `nki` made an absolute path, the workspace's lock file beside
/// it so the build needs no registry) and builds it; returns its binary.
fn build_fresh_crate() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nki-user-crate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = std::fs::read_to_string(fixture().join("Cargo.toml")).unwrap();
    let root = common::repo_root().display().to_string();
    assert!(manifest.contains("path = \"../..\""), "the fixture depends on the workspace by a relative path");
    std::fs::write(dir.join("Cargo.toml"), manifest.replace("path = \"../..\"", &format!("path = {root:?}"))).unwrap();
    std::fs::copy(common::repo_root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    for entry in std::fs::read_dir(fixture().join("src")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join("src").join(path.file_name().unwrap())).unwrap();
    }
    // A target directory of its own that outlives the test, so a second run
    // rebuilds only the crate (the test's cargo holds the workspace's). A debug
    // build: it compiles in about half the time, and nothing checked here
    // depends on optimization. Without debug info or incremental state it
    // compiles in about half the time again (nothing here reads either).
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("user-crate-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo)
        .args(["build", "--offline", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("CARGO_INCREMENTAL", "0")
        .output()
        .expect("running cargo");
    assert!(o.status.success(), "building the fresh crate failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    target.join("debug/my-kernels")
}

fn run_in(bin: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(bin).args(args).current_dir(dir).output().expect("running the crate's binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `x` where `x >= 0`, `alpha * x` elsewhere, in float64.
fn leaky_relu(x: &[f64], alpha: f64) -> Vec<f64> {
    x.iter().map(|&v| if v >= 0.0 { v } else { alpha * v }).collect()
}

#[test]
fn a_fresh_crate_with_nki_main_runs_profiles_emits_and_lists_its_kernel() {
    let bin = fresh_crate_binary();
    let dir = common::scratch("user-crate-run");
    let shape = [256, 8];
    let x = common::uniform(256 * 8, 71, -3.0, 3.0);
    write_npy(dir.join("x.npy"), &shape, &x, NpyType::F32).unwrap();
    let alpha = 0.125;

    let o = run_in(bin, &dir, &["list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let listed = text(&o.stdout);
    let line = listed.lines().find(|l| l.starts_with("leaky_relu ")).unwrap_or_else(|| panic!("leaky_relu not listed:\n{listed}"));
    assert_eq!(line.split_whitespace().collect::<Vec<_>>(), ["leaky_relu", "activations.py", "src/activations.rs"]);
    assert!(listed.contains("attention_cte "), "the kernels of the crates it links are listed too:\n{listed}");
    assert!(!listed.contains("tensor_add "), "the workspace's example kernels are not linked into a user's crate:\n{listed}");

    let o = run_in(bin, &dir, &["run", "leaky_relu", "--help"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let help = text(&o.stdout);
    assert!(help.starts_with("Usage: my-kernels run leaky_relu "), "{help}");
    assert!(help.contains("--alpha VALUE") && help.contains("a float in [0, 1]"), "{help}");
    // The tensor's shape as the kernel names its dims, and the kernel's assert on them.
    let lines: Vec<&str> = help.lines().collect();
    let at = lines.iter().position(|l| l.trim_start().starts_with("--x FILE.npy")).unwrap_or_else(|| panic!("{help}"));
    assert!(lines[at].contains("a tensor [n, d] of float32|bfloat16"), "{help}");
    assert_eq!(lines[at + 1].trim(), "- rows must be a multiple of 128, got <n>", "{help}");

    std::fs::create_dir(dir.join("out")).unwrap();
    let alpha_flag = alpha.to_string();
    let o = run_in(bin, &dir, &["run", "leaky_relu", "--x", "x.npy", "--alpha", &alpha_flag, "--out", "out"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "wrote out/out0.npy [256, 8] float32");
    let got = read_npy(dir.join("out/out0.npy")).unwrap();
    assert_eq!(got.shape, shape);
    let want = leaky_relu(&common::as_dtype(&x, Dtype::F32), alpha);
    let got_f32: Vec<f32> = got.data.iter().map(|&v| v as f32).collect();
    // Scaling by a power of two and a maximum are exact in fp32.
    common::assert_close("leaky_relu", &got_f32, &want, 0.0, 0.0);

    let o = run_in(bin, &dir, &["profile", "leaky_relu", "--x", "x.npy", "--alpha", &alpha_flag, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Each program (one per core) runs both 128-row tiles: load, scale, maximum, store.
    assert_eq!(report["instructions"], 2 * 4 * report["cores"].as_u64().unwrap(), "{report}");
    assert_eq!(report["bottleneck"], "vector", "{report}");
    assert_eq!(report["tensor_flops"], 0, "{report}");
    assert!(report["estimated_seconds"].as_f64().unwrap() > 0.0, "{report}");
    let o = run_in(bin, &dir, &["profile", "leaky_relu", "--x", "x.npy", "--alpha", &alpha_flag]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report = text(&o.stdout);
    assert!(report.contains("tensor engine: 0.00 TFLOP/s of 157.29 peak (0.0 %)"), "no matmul is no negative zero:\n{report}");

    let o = run_in(bin, &dir, &["emit", "--out", "pkg"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let module = std::fs::read_to_string(dir.join("pkg/activations.py")).unwrap();
    assert!(module.contains("def leaky_relu(x, alpha):"), "{module}");
    let args = vec![Arg::Tensor(shape.to_vec(), x.clone(), Dtype::F32), Arg::Float(alpha)];
    let numpy = common::run_numpy_ranks(&dir.join("pkg"), "leaky_relu", &[args], 2, "hardware");
    assert_eq!(numpy[0][0], got_f32, "the emitted kernel under NumPy agrees with the emulator");
}

#[test]
fn a_fresh_crate_refuses_bad_inputs_in_its_own_name() {
    let bin = fresh_crate_binary();
    let dir = common::scratch("user-crate-refuse");
    write_npy(dir.join("x.npy"), &[256, 8], &[1.0; 256 * 8], NpyType::F32).unwrap();
    write_npy(dir.join("odd.npy"), &[100, 8], &[1.0; 100 * 8], NpyType::F32).unwrap();
    std::fs::create_dir(dir.join("out")).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["run", "leaky_relu", "--x", "x.npy", "--alpha", "1.5", "--out", "out"], "error: --alpha 1.5: leaky_relu takes alpha in [0, 1]"),
        (&["run", "leaky_relu", "--x", "odd.npy", "--alpha", "0.5", "--out", "out"], "rows must be a multiple of 128, got 100"),
        (
            &["run", "leaky_relux", "--x", "x.npy"],
            "error: unknown kernel 'leaky_relux'; did you mean 'leaky_relu'? (`my-kernels list` shows every kernel)",
        ),
        (&["run", "leaky_relu", "--alpha", "0.5", "--out", "out"], "--x"),
    ];
    for (args, want) in cases {
        let o = run_in(bin, &dir, args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.join("out")).unwrap().count(), 0, "a refused run writes nothing");
}

#[test]
fn a_traceback_of_the_emitted_kernel_maps_back_to_the_rust_line() {
    let bin = fresh_crate_binary();
    let dir = common::scratch("user-crate-traceback");
    let o = run_in(bin, &dir, &["emit", "--out", "pkg"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // 100 rows break the kernel's `assert!` under the NumPy executor.
    write_npy(dir.join("odd.npy"), &[100, 8], &[1.0; 100 * 8], NpyType::F32).unwrap();
    let spec = r#"{"kernel": "leaky_relu", "lnc": 1, "ranks": 1, "precision": "hardware", "generation": "trn2",
        "args": [[{"npy": "odd.npy", "dtype": "float32"}, {"float": 0.5}]]}"#;
    std::fs::write(dir.join("spec.json"), spec).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let (ok, _, err) =
        common::harness(&["run", "--package", &path("pkg"), "--spec", &path("spec.json"), "--out", &path("np"), "--traceback"]);
    assert!(!ok, "100 rows are refused by the emitted kernel");
    let frame =
        err.lines().position(|l| l.trim_start().starts_with("File \"") && l.contains("activations.py")).unwrap_or_else(|| panic!("{err}"));

    let source = std::fs::read_to_string(fixture().join("src/activations.rs")).unwrap();
    let rust_line = source.lines().position(|l| l.trim_start().starts_with("assert!(n % rows == 0")).unwrap() + 1;
    let arrow = format!("--> src/activations.rs:{rust_line}");
    let translate = |input: &str| {
        let mut child =
            Command::new(bin).args(["traceback", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let o = translate(&err);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[frame + 1].trim(), arrow, "the frame in activations.py is followed by its Rust line:\n{out}");
    let last = lines.last().unwrap();
    assert_eq!(*last, arrow, "the executor's `error: activations.py:LINE` line maps too:\n{out}");
    assert_eq!(lines.iter().filter(|l| l.contains("-->")).count(), 2, "only the package's lines are mapped:\n{out}");
    assert!(out.starts_with(&err.lines().next().unwrap().to_string()), "the input is printed as it came:\n{out}");

    // A frame whose code is not what this build emits there (an edited or older
    // package) is not mapped; nothing mapped is an error.
    let code = err.lines().nth(frame + 1).unwrap();
    let stale: String =
        err.lines().take(frame + 2).map(|l| if l == code { "    y = other(x)\n".to_string() } else { format!("{l}\n") }).collect();
    let o = translate(&stale);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("-->"), "{}", text(&o.stdout));
    assert!(text(&o.stderr).contains("names no line of the modules `my-kernels emit` writes"), "{}", text(&o.stderr));
}
