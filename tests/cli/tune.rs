//! `nki tune`: a grid of a kernel's tunable parameters profiled, checked against
//! the first variant and ranked, with the ranking the cost model's rules predict.

use crate::common;

use nki::io::npy::{NpyType, write_npy};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn nki_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki")
}

/// A bf16 `[K, N]` blocked matmul is DMA-bound on trn2 (a bf16 matmul takes a
/// quarter of the fp32 time), and the moving tiles are loaded once per block of
/// `tiles_m` stationary tiles: the model ranks every `tiles_m` 2 variant ahead of
/// every `tiles_m` 1 variant, whatever `tiles_n`. `tiles_m` 3 does not divide M
/// and is refused; the outputs of all variants agree.
#[test]
fn blocked_matmul_grid_ranks_larger_stationary_blocks_first() {
    let dir = common::scratch("cli_tune_matmul");
    let (k, m, n) = (512, 512, 2048);
    write_npy(dir.join("a.npy"), &[k, m], &common::uniform(k * m, 1, -1.0, 1.0), NpyType::Bf16).unwrap();
    write_npy(dir.join("b.npy"), &[k, n], &common::uniform(k * n, 2, -1.0, 1.0), NpyType::Bf16).unwrap();
    let o = nki_in(&dir, &["tune", "matmul-blocked", "--a-t", "a.npy", "--b", "b.npy", "--tiles-m", "1,2,3", "--tiles-n", "1,2", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ranking = report["ranking"].as_array().unwrap();
    let names: Vec<&str> = ranking.iter().map(|v| v["variant"].as_str().unwrap()).collect();
    assert_eq!(ranking.len(), 4, "{names:?}");
    assert!(
        names[..2].iter().all(|v| v.starts_with("--tiles-m 2")) && names[2..].iter().all(|v| v.starts_with("--tiles-m 1")),
        "{names:?}"
    );
    let times: Vec<f64> = ranking.iter().map(|v| v["estimated_seconds"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for v in ranking {
        assert_eq!(v["agrees"], true, "{v}");
        assert!(v["difference"].as_f64().unwrap() <= 1e-2);
        assert_eq!(v["report"]["bottleneck"], v["bottleneck"]);
    }
    let slowest = &ranking[3];
    assert_eq!(slowest["bottleneck"], "dma", "{slowest}");
    let refused = report["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|r| r["variant"].as_str().unwrap().starts_with("--tiles-m 3")), "{refused:?}");

    // The text ranking names each variant's bottleneck; --trace writes the fastest one's timeline.
    let o = nki_in(
        &dir,
        &["tune", "matmul-blocked", "--a-t", "a.npy", "--b", "b.npy", "--tiles-m=2,1", "--tiles-n", "2", "--trace", "best.json"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("matmul_blocked on trn2: 2 variants"), "{text}");
    assert!(lines[2].contains("--tiles-m 2") && lines[3].contains("--tiles-m 1") && lines[3].contains("dma"), "{text}");
    let trace: Value = serde_json::from_slice(&std::fs::read(dir.join("best.json")).unwrap()).unwrap();
    assert!(!trace["traceEvents"].as_array().unwrap().is_empty());
}

/// A parameter that changes the result is no tuning: the ranking is printed,
/// the variant is marked, and the command fails.
#[test]
fn variants_with_different_outputs_fail_the_command() {
    let dir = common::scratch("cli_tune_differs");
    write_npy(dir.join("x.npy"), &[128, 64], &common::uniform(128 * 64, 3, -1.0, 1.0), NpyType::F32).unwrap();
    write_npy(dir.join("g.npy"), &[1, 64], &common::uniform(64, 4, 0.5, 1.5), NpyType::F32).unwrap();
    write_npy(dir.join("b.npy"), &[1, 64], &common::uniform(64, 5, -0.5, 0.5), NpyType::F32).unwrap();
    let o = nki_in(&dir, &["tune", "layernorm", "--x", "x.npy", "--gamma", "g.npy", "--beta", "b.npy", "--eps", "1e-5,10"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("DIFFERS"));
    assert!(err.contains("different outputs") && err.contains("--eps 10"), "{err}");
    // A grid the kernel refuses entirely, and --out, are usage errors.
    let o = nki_in(&dir, &["tune", "layernorm", "--x", "x.npy", "--gamma", "g.npy", "--beta", "b.npy", "--eps", "1e-5,2e-5", "--out", "."]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let o = nki_in(&dir, &["tune", "layernorm", "--x", "missing.npy", "--gamma", "g.npy", "--beta", "b.npy", "--eps", "1e-5,2e-5"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains("refused every variant"), "{err}");
}

/// The library's `rmsnorm_quant_kernel` splits its rows over the LNC programs:
/// LNC 2 halves each core's Vector Engine work, so the model ranks it first,
/// Vector-bound either way, with the same quantized rows as LNC 1.
#[test]
fn rmsnorm_quant_ranks_lnc2_first() {
    let dir = common::scratch("cli_tune_rmsnorm_quant");
    let (s, h) = (256, 2048);
    write_npy(dir.join("x.npy"), &[1, s, h], &common::uniform(s * h, 6, -1.0, 1.0), NpyType::Bf16).unwrap();
    write_npy(dir.join("w.npy"), &[h], &common::uniform(h, 7, 0.5, 1.5), NpyType::Bf16).unwrap();
    let args = ["tune", "rmsnorm_quant_kernel", "--hidden", "x.npy", "--ln-w", "w.npy", "--kargs.norm-type", "RMS_NORM"];
    let o = nki_in(&dir, &[&args[..], &["--lnc", "1,2", "--json"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ranking = report["ranking"].as_array().unwrap();
    let names: Vec<&str> = ranking.iter().map(|v| v["variant"].as_str().unwrap()).collect();
    assert_eq!(names, ["--lnc 2", "--lnc 1"]);
    for v in ranking {
        assert_eq!(v["agrees"], true, "{v}");
        assert_eq!(v["bottleneck"], "vector", "{v}");
    }
    let busy = |v: &Value| v["estimated_seconds"].as_f64().unwrap() * v["report"]["engine_busy"]["vector"].as_f64().unwrap();
    let ratio = busy(&ranking[1]) / busy(&ranking[0]);
    assert!((ratio - 2.0).abs() < 0.05, "Vector time LNC 1 / LNC 2 = {ratio}");
}
