//! The `nki` command: help, emit, `run attention-cte` (outputs equal the
//! library API's; bad inputs give a one-line error and a non-zero exit),
//! `run ring-fwd` and `run ring-bwd` against float64 references, the benchmark's table, and the
//! demo (every kernel checked, the package written and signature-checked).

mod common;

use common::attention::Problem;
use common::attention_grad::GradProblem;
use nki::attention::cte::{CteConfig, CteInputs};
use nki::io::npy::{NpyType, read_npy, write_npy};
use nki::{Dtype, Launch};
use std::path::Path;
use std::process::{Command, Output};

fn nki_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).output().expect("running nki")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &Path, name: &str, shape: &[usize], vals: &[f64]) -> String {
    let p = dir.join(name);
    write_npy(&p, shape, vals, NpyType::F32).unwrap();
    p.display().to_string()
}

#[test]
fn help_documents_every_subcommand() {
    let o = nki_cmd(&["--help"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for sub in ["emit", "list", "run", "bench", "demo"] {
        assert!(text.contains(sub), "`{sub}` missing from --help:\n{text}");
    }
    let run_help = String::from_utf8_lossy(&nki_cmd(&["run", "--help"]).stdout).into_owned();
    for kernel in ["attention-cte", "ring-fwd", "ring-bwd"] {
        assert!(run_help.contains(kernel), "{run_help}");
    }
}

#[test]
fn emit_writes_a_package_that_passes_the_signature_check() {
    let dir = common::scratch("cli_emit").join("pkg");
    let o = nki_cmd(&["emit", "--out", &dir.display().to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["__init__.py", "attention_cte.py", "softmax.py"] {
        assert!(dir.join(f).exists(), "{f} not written");
    }
    let (ok, out, err) = common::harness(&["check", &dir.display().to_string()]);
    assert!(ok, "{out}{err}");
}

#[test]
fn run_attention_cte_matches_the_library_and_writes_the_stats() {
    let dir = common::scratch("cli_cte");
    let (bs, s, d) = (2usize, 256usize, 32usize);
    let (q, k, v) =
        (common::uniform(bs * s * d, 61, 0.0, 1.0), common::uniform(bs * s * d, 62, 0.0, 1.0), common::uniform(bs * s * d, 63, 0.0, 1.0));
    let (qp, kp, vp) =
        (write(&dir, "q.npy", &[bs, s, d], &q), write(&dir, "k.npy", &[bs, d, s], &k), write(&dir, "v.npy", &[bs, s, d], &v));
    let (out, nm, sm) = (dir.join("o.npy"), dir.join("nm.npy"), dir.join("s.npy"));
    let o = nki_cmd(&[
        "run",
        "attention-cte",
        "--q",
        &qp,
        "--k",
        &kp,
        "--v",
        &vp,
        "--scale",
        "0.125",
        "--cache-softmax",
        "--precision",
        "fp32",
        "--lnc",
        "2",
        "--out",
        &out.display().to_string(),
        "--neg-max",
        &nm.display().to_string(),
        "--sum",
        &sm.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (tq, tk, tv) = (
        common::tensor(&[bs, s, d], &q, Dtype::F32),
        common::tensor(&[bs, d, s], &k, Dtype::F32),
        common::tensor(&[bs, s, d], &v, Dtype::F32),
    );
    let cfg = CteConfig::new().scale(0.125).cache_softmax(true);
    let want = cfg.launch(&Launch::new().lnc(2).precision(nki::Precision::Fp32), &CteInputs::new(&tq, &tk, &tv)).unwrap();
    for (path, t) in [(&out, &want.out), (&nm, want.neg_max.as_ref().unwrap()), (&sm, want.sum.as_ref().unwrap())] {
        let got = read_npy(path).unwrap();
        assert_eq!(got.shape, t.shape());
        let exact: Vec<f64> = t.to_f32_vec().into_iter().map(f64::from).collect();
        assert_eq!(got.data, exact, "{}", path.display());
    }
}

#[test]
fn bad_inputs_give_one_line_errors() {
    let dir = common::scratch("cli_bad");
    let ok = write(&dir, "q.npy", &[1, 128, 16], &common::uniform(128 * 16, 1, 0.0, 1.0));
    let kt = write(&dir, "k.npy", &[1, 16, 128], &common::uniform(128 * 16, 2, 0.0, 1.0));
    let short_v = write(&dir, "v.npy", &[1, 100, 16], &common::uniform(100 * 16, 3, 0.0, 1.0));
    std::fs::write(dir.join("junk.npy"), b"not an array").unwrap();
    let junk = dir.join("junk.npy").display().to_string();
    let out = dir.join("o.npy").display().to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["--q", &ok, "--k", &kt, "--v", &short_v], "unexpected shape for v"),
        (&["--q", &junk, "--k", &kt, "--v", &short_v], "not a .npy file"),
        (&["--q", &ok, "--k", &kt, "--v", &ok, "--scale", "0.5", "--sliding-window", "32"], "invalid scale = 0.5"),
        (&["--q", &ok, "--k", &kt, "--v", &ok, "--cache-softmax"], "--neg-max is required"),
    ];
    for (args, want) in cases {
        let mut all = vec!["run", "attention-cte", "--out", &out];
        all.extend_from_slice(args);
        let o = nki_cmd(&all);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        assert!(err.starts_with("error: ") && err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn run_ring_fwd_gathers_the_global_output_and_lse() {
    let dir = common::scratch("cli_ring_fwd");
    let (bh, st, d, w) = (2usize, 1024usize, 32usize, 4usize);
    let input = |seed| common::uniform(bh * st * d, seed, -1.0, 1.0);
    let (q, k, v) = (input(71), input(72), input(73));
    let paths: Vec<String> =
        [("q.npy", &q), ("k.npy", &k), ("v.npy", &v)].iter().map(|(n, x)| write(&dir, n, &[1, bh, st, d], x)).collect();
    let (out, lse) = (dir.join("o.npy"), dir.join("lse.npy"));
    let (out_s, lse_s) = (out.display().to_string(), lse.display().to_string());
    let w_s = w.to_string();
    let o = nki_cmd(&[
        "run",
        "ring-fwd",
        "--q",
        &paths[0],
        "--k",
        &paths[1],
        "--v",
        &paths[2],
        "--workers",
        &w_s,
        "--causal",
        "--striped",
        "--training",
        "--precision",
        "fp32",
        "--lnc",
        "2",
        "--out",
        &out_s,
        "--lse",
        &lse_s,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let scale = 1.0 / (d as f64).sqrt();
    let want = Problem { scale, ..Problem::new(bh, bh, st, st, d, &q, &k, &v) }.solve(true);
    let got_o = read_npy(&out).unwrap();
    assert_eq!(got_o.shape, vec![1, bh, st, d]);
    let got_o: Vec<f32> = got_o.data.iter().map(|&x| x as f32).collect();
    common::assert_close("ring-fwd output", &got_o, &want.out, 1e-6, 1e-5);
    let got_l = read_npy(&lse).unwrap();
    assert_eq!(got_l.shape, vec![1, bh, st]);
    let got_l: Vec<f32> = got_l.data.iter().map(|&x| x as f32).collect();
    let want_l: Vec<f64> = want.max.iter().zip(&want.sum).map(|(m, s)| m + s.ln()).collect();
    common::assert_close("ring-fwd lse", &got_l, &want_l, 1e-6, 1e-5);

    // One-line errors for sequences the ring cannot split and for striped without causal.
    let cases: [(&[&str], &str); 2] =
        [(&["--workers", "3"], "multiple of the 3 workers"), (&["--striped", "--workers", "4"], "striped input needs the causal mask")];
    for (extra, msg) in cases {
        let mut args = vec!["run", "ring-fwd", "--q", &paths[0], "--k", &paths[1], "--v", &paths[2], "--out", &out_s];
        args.extend_from_slice(extra);
        let o = nki_cmd(&args);
        let err = stderr(&o);
        assert!(!o.status.success() && err.trim_end().lines().count() == 1 && err.contains(msg), "{args:?}: {err}");
    }
}

#[test]
fn run_ring_bwd_gathers_the_global_gradients() {
    let dir = common::scratch("cli_ring_bwd");
    let (bh, st, d) = (2usize, 1024usize, 32usize);
    let input = |seed| common::uniform(bh * st * d, seed, -1.0, 1.0);
    let (q, k, v, dy) = (input(81), input(82), input(83), input(84));
    let scale = 1.0 / (d as f64).sqrt();
    let want = GradProblem { bh, s: st, d, q: &q, k: &k, v: &v, dy: &dy, scale, causal: true }.solve();
    let shape = [1, bh, st, d];
    let files: Vec<String> = [("q", &q), ("k", &k), ("v", &v), ("o", &want.o), ("dy", &dy)]
        .iter()
        .map(|(n, x)| write(&dir, &format!("{n}.npy"), &shape, x))
        .collect();
    let lse = write(&dir, "lse.npy", &[1, bh, st], &want.lse);
    let outs: Vec<String> = ["dq", "dk", "dv"].iter().map(|n| dir.join(format!("{n}.npy")).display().to_string()).collect();
    let o = nki_cmd(&[
        "run",
        "ring-bwd",
        "--q",
        &files[0],
        "--k",
        &files[1],
        "--v",
        &files[2],
        "--o",
        &files[3],
        "--dy",
        &files[4],
        "--lse",
        &lse,
        "--workers",
        "4",
        "--causal",
        "--striped",
        "--precision",
        "fp32",
        "--lnc",
        "2",
        "--dq",
        &outs[0],
        "--dk",
        &outs[1],
        "--dv",
        &outs[2],
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (path, reference) in outs.iter().zip([&want.dq, &want.dk, &want.dv]) {
        let got = read_npy(Path::new(path)).unwrap();
        assert_eq!(got.shape, shape.to_vec());
        let got: Vec<f32> = got.data.iter().map(|&x| x as f32).collect();
        common::assert_close(path, &got, reference, 1e-6, 1e-4);
    }
}

#[test]
fn bench_quick_prints_a_row_per_mask_and_precision() {
    let o = nki_cmd(&["bench", "--quick", "--lnc", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("2 x 1024 x 128")).collect();
    assert_eq!(rows.len(), 4, "{text}");
    for (row, (mask, precision)) in rows.iter().zip([("full", "fp32"), ("full", "hardware"), ("causal", "fp32"), ("causal", "hardware")]) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((cols[5], cols[6]), (mask, precision), "{row}");
        let gflops: f64 = cols[8].parse().unwrap_or_else(|_| panic!("GFLOP/s column in {row}"));
        assert!(gflops > 0.0 && gflops.is_finite(), "{row}");
    }
}

#[test]
fn demo_checks_every_kernel_in_both_modes_and_writes_the_package() {
    let out = common::scratch("cli_demo").join("nki_out");
    let o = nki_cmd(&["demo", "--out", &out.display().to_string()]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}{}", stderr(&o));
    for kernel in ["attention_cte", "ring_attention_spmd_fwd", "ring_attention_spmd_bwd"] {
        for precision in ["fp32", "hardware"] {
            let row = text.lines().find(|l| l.starts_with(kernel) && l.split_whitespace().nth(1) == Some(precision));
            let row = row.unwrap_or_else(|| panic!("no {kernel} {precision} row in:\n{text}"));
            let cols: Vec<&str> = row.split_whitespace().collect();
            let (err, bound): (f64, f64) = (cols[2].parse().unwrap(), cols[3].parse().unwrap());
            assert!(err <= bound && cols[6] == "ok", "{row}");
        }
    }
    let (ok, stdout, stderr) = common::harness(&["check", &out.display().to_string()]);
    assert!(ok, "the demo's package fails the signature check:\n{stdout}{stderr}");
}
