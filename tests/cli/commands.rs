//! The `nki` command: help, emit, `run attention-cte` (outputs equal the
//! library API's; bad inputs give a one-line error and a non-zero exit),
//! `run ring-fwd` and `run ring-bwd` against float64 references, the benchmark's table, and the
//! demo (every kernel checked, a prefill and decode step and an MoE step included, the package
//! written and signature-checked); a
//! closed standard output ends a command with status 141, never a panic.

use crate::common;

use crate::common::attention::Problem;
use crate::common::attention_grad::GradProblem;
use nki::attention::cte::{CteConfig, CteInputs};
use nki::io::npy::{NpyType, header_bytes, read_npy, write_npy};
use nki::{Dtype, Launch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nki_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).output().expect("running nki")
}

fn nki_cmd_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki")
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
    for kernel in ["attention-cte", "attention-tkg", "ring-fwd", "ring-bwd"] {
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
        (&["--q", &ok, "--k", &kt, "--v", &short_v], "invalid v = shape [1, 100, 16]: the configuration's dims make it [1, 128, 16]"),
        (&["--q", &junk, "--k", &kt, "--v", &short_v], "not a .npy file"),
        (&["--q", &ok, "--k", &kt, "--v", &ok, "--scale", "0.5", "--sliding-window", "32"], "invalid scale = 0.5"),
        (&["--q", &ok, "--k", &kt, "--v", &ok, "--cache-softmax"], "--neg-max is required"),
    ];
    for (args, want) in cases {
        let mut all = vec!["run", "attention-cte", "--out", &out];
        all.extend_from_slice(args);
        let o = nki_cmd(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
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
    let python = common::python().to_str().expect("a UTF-8 path");
    let o = nki_cmd(&["bench", "--quick", "--lnc", "1", "--numpy", python]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    // NumPy's SGEMM rate, measured in the same run, and each row's share of it.
    let sgemm_line = text.lines().find(|l| l.starts_with("NumPy SGEMM (2048^3 float32")).unwrap_or_else(|| panic!("no SGEMM line: {text}"));
    let sgemm: f64 = sgemm_line.split_whitespace().rev().nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{sgemm_line}"));
    assert!(sgemm > 0.0 && sgemm.is_finite(), "{sgemm_line}");
    // The emulator's matmul instruction on one thread, and every thread at that rate as a share of the SGEMM.
    let matmul_line = text.lines().find(|l| l.starts_with("nc_matmul 128 x 128 x 512 float32 on one thread (best of 1): "));
    let matmul_line = matmul_line.unwrap_or_else(|| panic!("no nc_matmul line: {text}"));
    let words: Vec<&str> = matmul_line.split_whitespace().collect();
    let number = |i: usize| words.get(i).and_then(|w| w.trim_end_matches(['%', ';']).parse::<f64>().ok());
    let (rate, threads, ceiling) = (number(13), number(15), number(20));
    let (Some(rate), Some(threads), Some(ceiling)) = (rate, threads, ceiling) else { panic!("{matmul_line}") };
    assert!(rate > 0.0 && rate.is_finite() && words[14] == "GFLOP/s;" && words[21..] == ["of", "SGEMM"], "{matmul_line}");
    assert_eq!(threads, std::thread::available_parallelism().map_or(1, |n| n.get()) as f64, "{matmul_line}");
    let slack = 0.5 + 100.0 * threads * 0.05 * (1.0 / sgemm + rate / (sgemm * (sgemm - 0.05)));
    assert!((ceiling - 100.0 * threads * rate / sgemm).abs() <= slack + 1e-9, "{matmul_line} vs {sgemm_line}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("2 x 1024 x 128")).collect();
    assert_eq!(rows.len(), 4, "{text}");
    for (row, (mask, precision)) in rows.iter().zip([("full", "fp32"), ("full", "hardware"), ("causal", "fp32"), ("causal", "hardware")]) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((cols[5], cols[6]), (mask, precision), "{row}");
        let gflops: f64 = cols[8].parse().unwrap_or_else(|_| panic!("GFLOP/s column in {row}"));
        assert!(gflops > 0.0 && gflops.is_finite(), "{row}");
        let share: f64 = cols[9].strip_suffix('%').and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("share column in {row}"));
        // The columns are printed rounded (GFLOP/s to 0.05, the share to 0.5
        // points): the share may differ from the printed rates' quotient by
        // what those roundings move it, which grows as a loaded machine's
        // SGEMM rate falls.
        let slack = 0.5 + 100.0 * 0.05 * (1.0 / sgemm + gflops / (sgemm * (sgemm - 0.05)));
        assert!((share - 100.0 * gflops / sgemm).abs() <= slack + 1e-9, "{row} vs {sgemm_line}");
    }
    // The decode rows: batch 8, a 1024-position cache, d 128, in tokens per second.
    let decode: Vec<&str> = text.lines().filter(|l| l.starts_with("8 x 1024 x 128")).collect();
    assert_eq!(decode.len(), 2, "{text}");
    for (row, precision) in decode.iter().zip(["fp32", "hardware"]) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[5], precision, "{row}");
        let tokens: f64 = cols[7].parse().unwrap_or_else(|_| panic!("tokens/s column in {row}"));
        assert!(tokens > 0.0 && tokens.is_finite(), "{row}");
    }
    // Whole processes on one thread and with the defaults, per mask; no JAX column without --jax.
    assert!(text.contains("whole `nki run attention-cte` processes, 2 x 1024 x 128"), "{text}");
    for mask in ["full", "causal"] {
        let row = text.lines().find(|l| l.starts_with(&format!("{mask} "))).unwrap_or_else(|| panic!("no {mask} row: {text}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        let secs: Vec<f64> = cols[1..4].iter().map(|c| c.parse().unwrap_or_else(|_| panic!("{row}"))).collect();
        assert!(secs.iter().all(|s| *s > 0.0 && s.is_finite()), "{row}");
        assert_eq!(&cols[4..], ["-", "-"], "{row}");
    }
    // The decoder layer: prefill and decode tokens per second in each precision mode.
    assert!(text.contains("decoder layer (nki demo)"), "{text}");
    for precision in ["fp32", "hardware"] {
        let row =
            text.lines().find(|l| l.starts_with(&format!("{precision} "))).unwrap_or_else(|| panic!("no layer {precision} row: {text}"));
        let rates: Vec<f64> = row.split_whitespace().skip(1).map(|c| c.parse().unwrap_or_else(|_| panic!("{row}"))).collect();
        assert!(rates.len() == 3 && rates.iter().all(|r| *r > 0.0 && r.is_finite()), "{row}");
    }
    // The MoE step: its seconds and decode tokens per second in each precision mode.
    let moe = text.split("MoE decode step (nki demo)").nth(1).unwrap_or_else(|| panic!("no MoE table: {text}"));
    for precision in ["fp32", "hardware"] {
        let row = moe.lines().find(|l| l.starts_with(&format!("{precision} "))).unwrap_or_else(|| panic!("no MoE {precision} row: {moe}"));
        let rates: Vec<f64> = row.split_whitespace().skip(1).map(|c| c.parse().unwrap_or_else(|_| panic!("{row}"))).collect();
        assert!(rates.len() == 2 && rates.iter().all(|r| *r > 0.0 && r.is_finite()), "{row}");
    }
}

#[test]
fn bench_only_prints_the_tables_asked_for() {
    let o = nki_cmd(&["bench", "--quick", "--lnc", "1", "--only", "decode"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    // The machine first (the figures depend on it), then the one table.
    let mut lines = text.lines();
    let machine = lines.next().unwrap_or_default();
    assert!(machine.starts_with("machine: ") && machine.contains(" threads, matmul kernel "), "{text}");
    let kernel = machine.rsplit("matmul kernel ").next().unwrap_or_default();
    assert!(["AVX-512, 12 x 32 tiles", "AVX2 + FMA, 6 x 16 tiles", "matrixmultiply"].contains(&kernel), "{machine}");
    assert_eq!(lines.next(), Some(""), "{text}");
    assert!(lines.next().is_some_and(|l| l.starts_with("attention_tkg decode")), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("8 x 1024 x 128")).count(), 2, "{text}");
    for other in ["attention_cte emulator throughput", "whole `nki run", "ring_attention_spmd_fwd"] {
        assert!(!text.contains(other), "{other} printed: {text}");
    }
    // An interpreter that cannot time NumPy leaves the share unmeasured, and says so.
    let o = nki_cmd(&["bench", "--quick", "--lnc", "1", "--only", "prefill", "--numpy", "/nonexistent/python"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("NumPy SGEMM not measured (--numpy /nonexistent/python:"), "{text}");
    let matmul_line = text.lines().find(|l| l.starts_with("nc_matmul 128 x 128 x 512 float32 on one thread")).unwrap_or_default();
    assert!(matmul_line.ends_with(" GFLOP/s"), "no share of an unmeasured SGEMM: {text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("2 x 1024 x 128")).collect();
    assert!(rows.len() == 4 && rows.iter().all(|r| r.ends_with(" -")), "{text}");
    let o = nki_cmd(&["bench", "--quick", "--only", "everything"]);
    assert!(
        !o.status.success() && stderr(&o).contains("possible values: prefill, decode, process, ring, ring-features, layer, moe"),
        "{}",
        stderr(&o)
    );
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
    assert_layer_rows(&text);
    assert_moe_rows(&text, 2048);
    let (ok, stdout, stderr) = common::harness(&["check", &out.display().to_string()]);
    assert!(ok, "the demo's package fails the signature check:\n{stdout}{stderr}");
}

/// The decoder layer's rows of `nki demo`: the prefill and every decode step
/// checked in both precision modes, and each library kernel's trn2 estimate.
fn assert_layer_rows(text: &str) {
    let mut outputs = vec!["prefill, 256 tokens".to_string()];
    outputs.extend((1..=4).map(|t| format!("decode step {t}, position {}", 255 + t)));
    for output in &outputs {
        for precision in ["fp32", "hardware"] {
            let row = text.lines().find(|l| l.starts_with(output.as_str()) && l.contains(&format!(" {precision} ")));
            let row = row.unwrap_or_else(|| panic!("no '{output}' {precision} row in:\n{text}"));
            let cols: Vec<&str> = row[output.len()..].split_whitespace().collect();
            let (err, bound): (f64, f64) = (cols[1].parse().unwrap(), cols[2].parse().unwrap());
            assert!(err <= bound && cols[4] == "ok", "{row}");
        }
    }
    assert_estimates(text, "prefill", &["qkv_cte", "rope_hf", "attention_cte", "output_projection_cte", "mlp", "layer total"]);
    assert_estimates(text, "decode", &["qkv_tkg", "attention_tkg", "output_projection_tkg", "mlp", "layer total"]);
}

/// A positive, finite trn2 estimate for each of `kernels` in `phase`.
fn assert_estimates(text: &str, phase: &str, kernels: &[&str]) {
    for kernel in kernels {
        let row = text.lines().find(|l| l.starts_with(phase) && l[phase.len()..].trim_start().starts_with(kernel));
        let row = row.unwrap_or_else(|| panic!("no {phase} {kernel} estimate in:\n{text}"));
        let us: f64 = row.split(" µs").next().and_then(|r| r.split_whitespace().last()?.parse().ok()).unwrap_or_else(|| panic!("{row}"));
        assert!(us > 0.0 && us.is_finite(), "{row}");
    }
}

/// The MoE step's rows of `nki demo` (a block of `hidden` wide): the router's
/// affinities and the output checked in both precision modes, and both
/// kernels' trn2 estimates.
fn assert_moe_rows(text: &str, hidden: usize) {
    assert!(text.contains(&format!("MoE decode step from library kernels: hidden {hidden}, 8 experts")), "{text}");
    for output in ["router affinities, 4 tokens", "MoE output, 4 tokens"] {
        for precision in ["fp32", "hardware"] {
            let row = text.lines().find(|l| l.starts_with(output) && l.contains(&format!(" {precision} ")));
            let row = row.unwrap_or_else(|| panic!("no '{output}' {precision} row in:\n{text}"));
            let cols: Vec<&str> = row[output.len()..].split_whitespace().collect();
            let (err, bound): (f64, f64) = (cols[1].parse().unwrap(), cols[2].parse().unwrap());
            assert!(err <= bound && cols[4] == "ok", "{row}");
        }
    }
    assert_estimates(text, "moe", &["router_topk", "moe_tkg", "step total"]);
}

#[test]
fn demo_quick_runs_the_decoder_layer_and_a_narrower_moe_step_only() {
    let out = common::scratch("cli_demo_quick").join("nki_out");
    let o = nki_cmd(&["demo", "--quick", "--out", &out.display().to_string()]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert_layer_rows(&text);
    assert_moe_rows(&text, 512);
    assert!(!text.contains("ring_attention_spmd_fwd"), "{text}");
}

// ---- Refused inputs: one line on stderr, nothing written, inputs intact ----

/// Every file under `dir` (recursively) with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else {
                let bytes =
                    if p.is_symlink() { p.read_link().unwrap().display().to_string().into_bytes() } else { std::fs::read(&p).unwrap() };
                files.push((p, bytes));
            }
        }
    }
    files.sort();
    files
}

/// Runs `nki args` in `dir` and asserts it is refused with exit `code` and one
/// stderr line holding every `want`, without a panic, leaving every file under
/// `dir` as it was: no output, no temporary, inputs byte-identical.
fn assert_refused(dir: &Path, args: &[&str], code: i32, want: &[&str]) {
    let before = snapshot(dir);
    let o = Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line:\n{err}");
    assert!(err.starts_with("error: ") && !err.contains("panicked"), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{w}` missing from: {err}");
    }
    assert!(snapshot(dir) == before, "{args:?} changed the files under {}", dir.display());
}

/// A float32 `.npy` header for `shape` followed by `payload`, whatever its length.
fn raw_npy(dir: &Path, name: &str, shape: &[usize], payload: &[u8]) {
    let mut bytes = header_bytes(NpyType::F32, shape);
    bytes.extend_from_slice(payload);
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// A CTE problem's files in `dir`: q `(1, 128, 16)`, k `(1, 16, 128)`, v `(1, 128, 16)`.
fn cte_files(dir: &Path) {
    write(dir, "q.npy", &[1, 128, 16], &common::uniform(128 * 16, 1, 0.0, 1.0));
    write(dir, "k.npy", &[1, 16, 128], &common::uniform(128 * 16, 2, 0.0, 1.0));
    write(dir, "v.npy", &[1, 128, 16], &common::uniform(128 * 16, 3, 0.0, 1.0));
}

/// Whole-sequence ring inputs in `dir` (`[1, 2, 256, 16]`, two ranks of 128) and the LSE `[1, 2, 256]`.
fn ring_files(dir: &Path) {
    for (i, name) in ["q", "k", "v", "o", "dy"].iter().enumerate() {
        write(dir, &format!("{name}.npy"), &[1, 2, 256, 16], &common::uniform(2 * 256 * 16, 10 + i as u64, -1.0, 1.0));
    }
    write(dir, "lse.npy", &[1, 2, 256], &common::uniform(2 * 256, 20, 1.0, 2.0));
}

const CTE: [&str; 8] = ["run", "attention-cte", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy"];
const RING_FWD: [&str; 10] = ["run", "ring-fwd", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--workers", "2"];
const RING_BWD: [&str; 16] = [
    "run",
    "ring-bwd",
    "--q",
    "q.npy",
    "--k",
    "k.npy",
    "--v",
    "v.npy",
    "--o",
    "o.npy",
    "--dy",
    "dy.npy",
    "--lse",
    "lse.npy",
    "--workers",
    "2",
];

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

#[test]
fn a_shape_whose_product_wraps_is_refused_without_a_panic() {
    let dir = common::scratch("cli_wrap");
    ring_files(&dir);
    // 2^32 · 2^32 · 1 · 1 wraps to 0 elements in u64 arithmetic; the file holds no data.
    raw_npy(&dir, "q.npy", &[1 << 32, 1 << 32, 1, 1], &[]);
    assert_refused(&dir, &with(&RING_FWD, &["--out", "o2.npy"]), 2, &["--q", "invalid shape = [4294967296, 4294967296, 1, 1]"]);
    // 3 · 6148914691236517206 wraps to 2 elements, and the file holds two.
    raw_npy(&dir, "q.npy", &[3, 6_148_914_691_236_517_206, 1, 1], &[0; 8]);
    assert_refused(&dir, &with(&RING_FWD, &["--out", "o2.npy"]), 2, &["--q", "invalid shape", "more than"]);
    // A large, representable shape with no data behind it: refused before allocating.
    raw_npy(&dir, "q.npy", &[1, 1 << 20, 1 << 20, 1], &[]);
    assert_refused(&dir, &with(&RING_FWD, &["--out", "o2.npy"]), 2, &["--q", "truncated"]);
}

#[test]
fn a_broken_file_among_inputs_read_together_is_named_by_its_flag() {
    let dir = common::scratch("cli_together");
    cte_files(&dir);
    // Half of k's payload: the header promises 16 × 128 float32 values.
    raw_npy(&dir, "kt.npy", &[1, 16, 128], &[0; 16 * 128 * 2]);
    let args = ["run", "attention-cte", "--q", "q.npy", "--k", "kt.npy", "--v", "v.npy", "--out", "out.npy"];
    assert_refused(&dir, &args, 2, &["--k kt.npy", "truncated"]);
}

#[test]
fn integer_and_bool_tensors_are_refused_for_float_parameters() {
    let dir = common::scratch("cli_dtypes");
    cte_files(&dir);
    ring_files(&dir);
    write_npy(dir.join("qi.npy"), &[1, 128, 16], &vec![1.0; 128 * 16], NpyType::I32).unwrap();
    write_npy(dir.join("vb.npy"), &[1, 128, 16], &vec![1.0; 128 * 16], NpyType::Bool).unwrap();
    write_npy(dir.join("ki.npy"), &[1, 2, 256, 16], &vec![1.0; 2 * 256 * 16], NpyType::I64).unwrap();
    write_npy(dir.join("lsei.npy"), &[1, 2, 256], &vec![1.0; 2 * 256], NpyType::I32).unwrap();
    let cte_q = ["run", "attention-cte", "--q", "qi.npy", "--k", "k.npy", "--v", "v.npy", "--out", "out.npy"];
    assert_refused(&dir, &cte_q, 2, &["--q qi.npy", "invalid q = int32", "attention_cte takes q as float32, bfloat16 or float16"]);
    let cte_v = ["run", "attention-cte", "--q", "q.npy", "--k", "k.npy", "--v", "vb.npy", "--out", "out.npy"];
    assert_refused(&dir, &cte_v, 2, &["--v vb.npy", "invalid v = uint8", "attention_cte takes v as"]);
    let fwd_k = ["run", "ring-fwd", "--q", "q.npy", "--k", "ki.npy", "--v", "v.npy", "--workers", "2", "--out", "out.npy"];
    assert_refused(&dir, &fwd_k, 2, &["--k ki.npy", "invalid k = int32", "ring_attention_spmd_fwd takes k as"]);
    let mut bwd: Vec<&str> = with(&RING_BWD, &["--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy"]);
    bwd[13] = "lsei.npy";
    assert_refused(&dir, &bwd, 2, &["--lse lsei.npy", "invalid lse = int32", "ring_attention_spmd_bwd takes lse as"]);
}

#[test]
fn scales_that_are_not_finite_are_refused() {
    let dir = common::scratch("cli_scale_finite");
    cte_files(&dir);
    assert_refused(&dir, &with(&CTE, &["--out", "out.npy", "--scale", "nan"]), 2, &["invalid scale = NaN", "finite float32"]);
    assert_refused(
        &dir,
        &with(&CTE, &["--out", "out.npy", "--no-causal", "--scale", "inf"]),
        2,
        &["invalid scale = inf", "finite float32"],
    );
    let dir = common::scratch("cli_scale_finite_ring");
    ring_files(&dir);
    assert_refused(
        &dir,
        &with(&RING_FWD, &["--out", "out.npy", "--causal", "--scale=-inf"]),
        2,
        &["softmax_scale = -inf", "finite float32"],
    );
    assert_refused(
        &dir,
        &with(&RING_FWD, &["--out", "out.npy", "--scale", "1e39"]),
        2,
        &["softmax_scale = 1000000000000000000000000000000000000000", "finite"],
    );
    let bwd = with(&RING_BWD, &["--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy", "--scale", "NaN"]);
    assert_refused(&dir, &bwd, 2, &["softmax_scale = NaN", "ring attention: softmax_scale must be a finite float32"]);
}

#[test]
fn scales_that_would_unmask_the_causal_mask_are_refused() {
    let dir = common::scratch("cli_scale_causal");
    cte_files(&dir);
    for scale in ["0", "-0.5", "1e-31"] {
        let args = with(&CTE, &["--out", "out.npy", "--scale", scale]);
        assert_refused(
            &dir,
            &args,
            2,
            &[&format!("invalid scale = {}", scale.parse::<f64>().unwrap()), "with causal_mask the scale must be at least 1e-30"],
        );
    }
    let dir = common::scratch("cli_scale_causal_bwd");
    ring_files(&dir);
    let bwd = with(&RING_BWD, &["--causal", "--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy", "--scale", "-0.25"]);
    assert_refused(
        &dir,
        &bwd,
        2,
        &["softmax_scale = -0.25", "with a mask (causal, window, chunks) the softmax_scale must be at least 1e-30"],
    );
}

#[test]
fn an_output_that_cannot_be_written_is_refused_before_any_output_is() {
    let dir = common::scratch("cli_unwritable");
    ring_files(&dir);
    std::fs::create_dir(dir.join("taken")).unwrap();
    // The second output is in a directory that does not exist, under a file, or is a directory.
    for lse in ["missing/lse.npy", "q.npy/lse.npy", "taken"] {
        assert_refused(&dir, &with(&RING_FWD, &["--training", "--out", "out.npy", "--lse", lse]), 2, &[&format!("--lse {lse}")]);
        let bwd = with(&RING_BWD, &["--dq", "dq.npy", "--dk", "dk.npy", "--dv", lse]);
        assert_refused(&dir, &bwd, 2, &[&format!("--dv {lse}")]);
    }
}

#[test]
fn an_output_on_an_input_or_on_another_output_is_refused() {
    let dir = common::scratch("cli_same_file");
    cte_files(&dir);
    std::fs::hard_link(dir.join("q.npy"), dir.join("q_hard.npy")).unwrap();
    std::os::unix::fs::symlink(dir.join("q.npy"), dir.join("q_link.npy")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    for out in ["q.npy", "./q.npy", "sub/../q.npy", "q_hard.npy", "q_link.npy", &dir.join("v.npy").display().to_string()] {
        assert_refused(&dir, &with(&CTE, &["--out", out]), 2, &[&format!("--out {out}"), "same file as --", "never overwrites an input"]);
    }
    let three = with(&CTE, &["--cache-softmax", "--out", "o.npy", "--neg-max", "./o.npy", "--sum", "o.npy"]);
    assert_refused(&dir, &three, 2, &["--neg-max ./o.npy is the same file as --out o.npy", "its own file"]);
    let two = with(&CTE, &["--cache-softmax", "--out", "o.npy", "--neg-max", "n.npy", "--sum", "sub/../n.npy"]);
    assert_refused(&dir, &two, 2, &["--sum sub/../n.npy is the same file as --neg-max n.npy"]);
}

#[test]
fn zero_workers_get_the_ring_rule_not_a_division_message() {
    let dir = common::scratch("cli_zero_workers");
    ring_files(&dir);
    let mut fwd = with(&RING_FWD, &["--out", "out.npy"]);
    fwd[9] = "0";
    assert_refused(&dir, &fwd, 2, &["invalid num_workers = 0", "ring attention: num_workers must be >= 1"]);
    let mut bwd = with(&RING_BWD, &["--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy"]);
    bwd[15] = "0";
    assert_refused(&dir, &bwd, 2, &["invalid num_workers = 0", "ring attention: num_workers must be >= 1"]);
}

#[test]
fn usage_errors_are_one_line_with_exit_code_2() {
    let dir = common::scratch("cli_usage");
    cte_files(&dir);
    assert_refused(&dir, &CTE, 2, &["--out is required"]);
    assert_refused(&dir, &with(&CTE, &["--out", "o.npy", "--neg-max", "n.npy"]), 2, &["--cache-softmax"]);
    assert_refused(&dir, &with(&CTE, &["--out", "o.npy", "--lnc", "3"]), 2, &["invalid value '3' for '--lnc"]);
    assert_refused(&dir, &with(&CTE, &["--out", "o.npy", "--scale", "x"]), 2, &["invalid value 'x' for '--scale"]);
}

// ---- Scales of either sign where nothing masked is scaled, against float64 ----

/// `x` (`[n, rows, cols]`) with its last two dims swapped.
fn transposed(x: &[f64], n: usize, rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for b in 0..n {
        for r in 0..rows {
            for c in 0..cols {
                out[(b * cols + c) * rows + r] = x[(b * rows + r) * cols + c];
            }
        }
    }
    out
}

fn read_f32(path: &Path) -> Vec<f32> {
    read_npy(path).unwrap().data.iter().map(|&x| x as f32).collect()
}

#[test]
fn negative_and_zero_scales_without_a_mask_match_float64() {
    let dir = common::scratch("cli_negative_cte");
    let (bh, s, d) = (2usize, 256usize, 32usize);
    let (q, k, v) = (
        common::uniform(bh * s * d, 91, -1.0, 1.0),
        common::uniform(bh * s * d, 92, -1.0, 1.0),
        common::uniform(bh * s * d, 93, -1.0, 1.0),
    );
    write(&dir, "q.npy", &[bh, s, d], &q);
    write(&dir, "k.npy", &[bh, d, s], &transposed(&k, bh, s, d));
    write(&dir, "v.npy", &[bh, s, d], &v);
    for (scale, text) in [(-0.3, "-0.3"), (0.0, "0")] {
        let o = nki_cmd_in(&dir, &with(&CTE, &["--no-causal", "--scale", text, "--precision", "fp32", "--out", "o.npy"]));
        assert!(o.status.success(), "{}", stderr(&o));
        let want = nki::attention::reference::forward(&q, &k, &v, [bh, s, d], scale, false);
        common::assert_close(&format!("attention_cte scale {scale}"), &read_f32(&dir.join("o.npy")), &want.out, 1e-6, 1e-5);
    }
}

#[test]
fn a_negative_scale_on_a_causal_ring_forward_matches_float64() {
    let dir = common::scratch("cli_negative_fwd");
    let (bh, st, d) = (2usize, 512usize, 32usize);
    let input = |seed| common::uniform(bh * st * d, seed, -1.0, 1.0);
    let (q, k, v) = (input(94), input(95), input(96));
    for (name, x) in [("q.npy", &q), ("k.npy", &k), ("v.npy", &v)] {
        write(&dir, name, &[1, bh, st, d], x);
    }
    // Causal rings scale Q before the kernel; the masks are not scaled, so the sign is free.
    let args = with(
        &RING_FWD,
        &["--causal", "--striped", "--training", "--scale", "-0.2", "--precision", "fp32", "--out", "o.npy", "--lse", "l.npy"],
    );
    let o = nki_cmd_in(&dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = nki::attention::reference::forward(&q, &k, &v, [bh, st, d], -0.2, true);
    common::assert_close("ring fwd output, scale -0.2", &read_f32(&dir.join("o.npy")), &want.out, 1e-6, 1e-5);
    common::assert_close("ring fwd lse, scale -0.2", &read_f32(&dir.join("l.npy")), &want.lse, 1e-6, 1e-5);
}

#[test]
fn a_negative_scale_on_a_ring_backward_without_a_mask_matches_float64() {
    let dir = common::scratch("cli_negative_bwd");
    let (bh, st, d) = (2usize, 512usize, 32usize);
    let input = |seed| common::uniform(bh * st * d, seed, -1.0, 1.0);
    let (q, k, v, dy) = (input(97), input(98), input(99), input(100));
    let scale = -0.25;
    let fwd = nki::attention::reference::forward(&q, &k, &v, [bh, st, d], scale, false);
    let want = nki::attention::reference::backward(&q, &k, &v, &dy, &fwd, [bh, st, d], scale, false);
    for (name, x) in [("q.npy", &q), ("k.npy", &k), ("v.npy", &v), ("o.npy", &fwd.out), ("dy.npy", &dy)] {
        write(&dir, name, &[1, bh, st, d], x);
    }
    write(&dir, "lse.npy", &[1, bh, st], &fwd.lse);
    let args = with(&RING_BWD, &["--scale", "-0.25", "--precision", "fp32", "--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy"]);
    let o = nki_cmd_in(&dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    for (name, reference) in [("dq.npy", &want.dq), ("dk.npy", &want.dk), ("dv.npy", &want.dv)] {
        common::assert_close(name, &read_f32(&dir.join(name)), reference, 1e-6, 1e-4);
    }
}

/// `nki run ring-fwd` then `ring-bwd` with GQA 2:1, zigzag, a sliding window and
/// sinks, against the float64 reference; flag validation exits 2 naming the flag
/// and writes nothing.
#[test]
fn ring_feature_flags_match_float64_and_bad_values_exit_2() {
    use nki::attention::reference::{Dims, Features, attend, attend_backward};
    let dir = common::scratch("cli_ring_features");
    let dims = Dims { batch: 1, heads: 4, kv_heads: 2, seqlen: 512, head_dim: 16 };
    let (nq, nk) = (4 * 512 * 16, 2 * 512 * 16);
    let (q, k, v, dy) = (
        common::uniform(nq, 31, -1.0, 1.0),
        common::uniform(nk, 32, -1.0, 1.0),
        common::uniform(nk, 33, -1.0, 1.0),
        common::uniform(nq, 34, -1.0, 1.0),
    );
    let sinks = [0.5, -0.3, 1.2, 0.1];
    for (name, shape, x) in
        [("q.npy", [1, 4, 512, 16], &q), ("k.npy", [1, 2, 512, 16], &k), ("v.npy", [1, 2, 512, 16], &v), ("dy.npy", [1, 4, 512, 16], &dy)]
    {
        write(&dir, name, &shape, x);
    }
    write(&dir, "sinks.npy", &[4], &sinks);
    let flags = [
        "--causal",
        "--layout",
        "zigzag",
        "--sliding-window",
        "150",
        "--soft-cap",
        "2.5",
        "--sinks",
        "sinks.npy",
        "--scale",
        "0.3",
        "--precision",
        "fp32",
    ];
    let fwd = with(&RING_FWD, &flags);
    let o = nki_cmd_in(&dir, &with(&fwd, &["--training", "--out", "o.npy", "--lse", "lse.npy"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let f = Features { causal: true, window: Some((150, 150)), soft_cap: Some(2.5), sinks: Some(&sinks), ..Features::default() };
    let want = attend(&q, &k, &v, &dims, 0.3, &f);
    common::assert_close("ring-fwd out", &read_f32(&dir.join("o.npy")), &want.out, 1e-6, 1e-5);
    common::assert_close("ring-fwd lse", &read_f32(&dir.join("lse.npy")), &want.lse, 1e-6, 1e-5);

    let outs = ["--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy", "--dsinks", "ds.npy"];
    let o = nki_cmd_in(&dir, &with(&with(&RING_BWD, &flags), &outs));
    assert!(o.status.success(), "{}", stderr(&o));
    // The reference gradients of the forward the kernel received (O and the LSE as written).
    let got = nki::attention::reference::Attention {
        out: read_f32(&dir.join("o.npy")).iter().map(|&x| f64::from(x)).collect(),
        lse: read_f32(&dir.join("lse.npy")).iter().map(|&x| f64::from(x)).collect(),
    };
    let g = attend_backward(&q, &k, &v, &dy, &got, &dims, 0.3, &f);
    for (name, want) in [("dq.npy", &g.dq), ("dk.npy", &g.dk), ("dv.npy", &g.dv), ("ds.npy", &g.dsinks)] {
        common::assert_close(name, &read_f32(&dir.join(name)), want, 1e-6, 1e-4);
    }

    // Bad values: exit 2, one line naming the flag, nothing written.
    let base = with(&RING_FWD, &["--out", "x.npy"]);
    for (extra, want) in [
        (&["--layout", "zigzag"][..], "--causal"),
        (&["--layout", "diagonal"][..], "--layout"),
        (&["--sliding-window", "-3"][..], "--sliding-window"),
        (&["--sliding-window", "4,x"][..], "--sliding-window"),
        (&["--chunk-size", "0"][..], "--chunk-size"),
        (&["--soft-cap", "0"][..], "--soft-cap"),
        (&["--causal", "--striped", "--layout", "zigzag"][..], "--layout"),
    ] {
        assert_refused(&dir, &with(&base, extra), 2, &[want]);
    }
    assert_refused(&dir, &with(&with(&RING_BWD, &outs), &[]), 2, &["--sinks"]);
}

/// A reader that closes the pipe before the output arrives (`nki ops | head -0`)
/// ends the command with SIGPIPE's status 141 and no panic message.
#[test]
fn closed_stdout_ends_quietly_with_status_141() {
    for args in [&["ops"][..], &["list"][..]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_nki")).args(args).stdout(writer).output().expect("running nki");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(141), "nki {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "nki {args:?} panicked: {stderr}");
    }
}

/// `nki run ring-fwd` then `ring-bwd` with segment ids and a bias (zigzag
/// causal, GQA 2:1; some query ids no key has), against the float64 reference:
/// the unseen rows come back as zeros with LSE -inf. Only one of the two id
/// flags exits 2 naming the other; ids or a bias of the wrong shape or dtype are
/// refused naming the flag; nothing is written.
#[test]
fn ring_segment_ids_and_bias_match_float64_and_bad_files_are_refused() {
    use nki::attention::reference::{Dims, Features, attend, attend_backward};
    let dir = common::scratch("cli_ring_segments");
    let dims = Dims { batch: 1, heads: 2, kv_heads: 1, seqlen: 512, head_dim: 16 };
    let (nq, nk) = (2 * 512 * 16, 512 * 16);
    let (q, k, v, dy) = (
        common::uniform(nq, 41, -1.0, 1.0),
        common::uniform(nk, 42, -1.0, 1.0),
        common::uniform(nk, 43, -1.0, 1.0),
        common::uniform(nq, 44, -1.0, 1.0),
    );
    for (name, shape, x) in
        [("q.npy", [1, 2, 512, 16], &q), ("k.npy", [1, 1, 512, 16], &k), ("v.npy", [1, 1, 512, 16], &v), ("dy.npy", [1, 2, 512, 16], &dy)]
    {
        write(&dir, name, &shape, x);
    }
    let (q_ids, kv_ids) = common::packed_segment_ids(1, 512, 45);
    let as_f64 = |x: &[i32]| x.iter().map(|&i| f64::from(i)).collect::<Vec<_>>();
    write_npy(dir.join("qs.npy"), &[1, 512], &as_f64(&q_ids), NpyType::I32).unwrap();
    write_npy(dir.join("ks.npy"), &[1, 512], &as_f64(&kv_ids), NpyType::I32).unwrap();
    let bias = common::uniform(2 * 512 * 512, 46, -2.0, 2.0);
    write(&dir, "bias.npy", &[1, 2, 512, 512], &bias);
    let flags = [
        "--causal",
        "--layout",
        "zigzag",
        "--q-segment-ids",
        "qs.npy",
        "--kv-segment-ids",
        "ks.npy",
        "--bias",
        "bias.npy",
        "--precision",
        "fp32",
    ];
    let o = nki_cmd_in(&dir, &with(&with(&RING_FWD, &flags), &["--training", "--out", "o.npy", "--lse", "lse.npy"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let f = Features { causal: true, segments: Some((&q_ids, &kv_ids)), bias: Some(&bias), ..Features::default() };
    let scale = 0.25;
    let want = attend(&q, &k, &v, &dims, scale, &f);
    let lse = read_f32(&dir.join("lse.npy"));
    assert_eq!(lse.iter().filter(|x| **x == f32::NEG_INFINITY).count(), 2 * 20, "20 rows of each head see no key");
    common::assert_close("ring-fwd out", &read_f32(&dir.join("o.npy")), &want.out, 1e-6, 1e-5);
    common::assert_close_lse("ring-fwd lse", &lse, &want.lse, 1e-6, 1e-5);

    let bwd = with(&RING_BWD, &flags);
    let o = nki_cmd_in(&dir, &with(&bwd, &["--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let got = nki::attention::reference::Attention {
        out: read_f32(&dir.join("o.npy")).iter().map(|&x| f64::from(x)).collect(),
        lse: lse.iter().map(|&x| f64::from(x)).collect(),
    };
    let g = attend_backward(&q, &k, &v, &dy, &got, &dims, scale, &f);
    for (name, want) in [("dq.npy", &g.dq), ("dk.npy", &g.dk), ("dv.npy", &g.dv)] {
        common::assert_close(name, &read_f32(&dir.join(name)), want, 1e-6, 1e-4);
    }

    write_npy(dir.join("short.npy"), &[1, 256], &as_f64(&q_ids[..256]), NpyType::I32).unwrap();
    write(&dir, "float.npy", &[1, 512], &as_f64(&q_ids));
    let base = with(&RING_FWD, &["--causal", "--out", "x.npy"]);
    assert_refused(&dir, &with(&base, &["--q-segment-ids", "qs.npy"]), 2, &["--kv-segment-ids"]);
    assert_refused(&dir, &with(&base, &["--kv-segment-ids", "ks.npy"]), 2, &["--q-segment-ids"]);
    let bad = [
        ("short.npy", "ks.npy", ["--q-segment-ids short.npy", "int32 [1, 256] must be [1, 512]"]),
        ("qs.npy", "float.npy", ["--kv-segment-ids float.npy", "ring_attention_spmd_fwd takes kv_segment_ids as int32"]),
    ];
    for (qf, kf, want) in bad {
        assert_refused(&dir, &with(&base, &["--q-segment-ids", qf, "--kv-segment-ids", kf]), 2, &want);
    }
    assert_refused(&dir, &with(&base, &["--bias", "q.npy"]), 2, &["--bias q.npy", "float32 [1, 2, 512, 16] must be [1, 2, 512, 512]"]);
}
