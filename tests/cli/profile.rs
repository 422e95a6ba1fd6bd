//! `nki profile`: the attention commands report an estimated timeline (text or
//! one JSON object), write a valid trace atomically, and refuse bad flags with
//! exit code 2.

use crate::common;

use nki::io::npy::{NpyType, write_npy};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn nki_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki")
}

fn write(dir: &Path, name: &str, shape: &[usize], seed: u64) {
    let n = shape.iter().product();
    write_npy(dir.join(name), shape, &common::uniform(n, seed, -1.0, 1.0), NpyType::F32).unwrap();
}

fn check_report(report: &Value, cores: u64) {
    let t = report["estimated_seconds"].as_f64().unwrap();
    assert!(t > 0.0 && t < 1.0, "{t}");
    assert_eq!(report["cores"], cores);
    let busy = report["engine_busy"].as_object().unwrap();
    for engine in ["tensor", "vector", "scalar", "gpsimd", "dma"] {
        let f = busy[engine].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&f), "{engine} {f}");
    }
    assert!(report["flops"].as_f64().unwrap() > 0.0);
}

#[test]
fn attention_cte_reports_json_and_writes_a_trace() {
    let dir = common::scratch("cli_profile_cte");
    let (s, d) = (512, 64);
    write(&dir, "q.npy", &[2, s, d], 1);
    write(&dir, "k.npy", &[2, d, s], 2);
    write(&dir, "v.npy", &[2, s, d], 3);
    let args = ["profile", "attention-cte", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "o.npy", "--lnc", "2"];
    let o = nki_in(&dir, &[&args[..], &["--json", "--trace", "t.json"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    check_report(&report, 2);
    // Causal attention over two batches: 2·S·S·d for QKᵀ and for PV each, about half of it unmasked.
    let flops = report["tensor_flops"].as_f64().unwrap();
    let full = 2.0 * 4.0 * (s * s * d) as f64;
    assert!(flops >= 0.5 * full && flops <= full, "{flops}");
    let trace: Value = serde_json::from_slice(&std::fs::read(dir.join("t.json")).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let tracks: Vec<&str> = events.iter().filter(|e| e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    for t in ["lnc0 tensor", "lnc1 tensor", "lnc0 dma", "lnc1 dma"] {
        assert!(tracks.contains(&t), "{tracks:?}");
    }
    assert!(events.iter().filter(|e| e["ph"] == "X").all(|e| e["dur"].as_f64().unwrap() >= 0.0));
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with('.')).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // The text report names the target and the engines; without --out nothing is written.
    std::fs::remove_file(dir.join("o.npy")).unwrap();
    let no_out: Vec<&str> = args.iter().copied().filter(|a| *a != "--out" && *a != "o.npy").collect();
    let o = nki_in(&dir, &[&no_out[..], &["--target", "trn3"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!dir.join("o.npy").exists());
    let text = String::from_utf8_lossy(&o.stdout);
    for part in ["estimated time on trn3", "engine busy", "tensor engine", "critical path", "SBUF"] {
        assert!(text.contains(part), "{part} missing:\n{text}");
    }
}

#[test]
fn ring_kernels_report_a_collective_track() {
    let dir = common::scratch("cli_profile_ring");
    for (i, n) in ["q.npy", "k.npy", "v.npy", "do.npy"].iter().enumerate() {
        write(&dir, n, &[1, 1, 512, 64], i as u64 + 10);
    }
    // No outputs: `nki profile` writes only those given.
    let fwd = ["profile", "ring-fwd", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--workers", "4", "--json"];
    let o = nki_in(&dir, &fwd);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    // 4 ranks, each an LNC2 pair: trn2's default LNC.
    check_report(&report, 8);
    assert!(report["engine_busy"]["collective"].as_f64().unwrap() > 0.0);
    assert!(!dir.join("o.npy").exists());
}

#[test]
fn bad_flags_exit_2() {
    let dir = common::scratch("cli_profile_bad");
    for (flag, value, says) in [
        ("--target", "trn9", "unknown target"),
        ("--trace", "no/such/dir/t.json", "does not exist"),
        ("--allocator", "heap", "unknown allocator"),
    ] {
        let o = nki_in(&dir, &["profile", "attention-cte", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "o.npy", flag, value]);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says) && err.lines().count() == 1, "{err}");
    }
    std::fs::write(dir.join("q.npy"), b"input").unwrap();
    let o = nki_in(&dir, &["profile", "softmax", "--x", "q.npy", "--trace", "q.npy"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a trace"));
    assert_eq!(std::fs::read(dir.join("q.npy")).unwrap(), b"input");
    let help = nki_in(&dir, &["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("profile"));
}

#[test]
fn example_kernels_profile_and_write_their_result() {
    let dir = common::scratch("cli_profile_examples");
    let (a, b) = (common::uniform(256 * 64, 1, -1.0, 1.0), common::uniform(256 * 64, 2, -1.0, 1.0));
    write_npy(dir.join("a.npy"), &[256, 64], &a, NpyType::F32).unwrap();
    write_npy(dir.join("b.npy"), &[256, 64], &b, NpyType::F32).unwrap();
    let o = nki_in(&dir, &["profile", "tensor-add", "--a", "a.npy", "--b", "b.npy", "--out", ".", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    // trn2's default LNC 2: both programs of the pair run the single-core kernel.
    check_report(&report, 2);
    // Two 64 KiB loads and one store.
    assert_eq!(report["bytes"].as_f64().unwrap(), 3.0 * 256.0 * 64.0 * 4.0);
    let sum = nki::io::npy::read_npy(dir.join("out0.npy")).unwrap();
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (*x as f32 + *y as f32) as f64).collect();
    common::assert_close("tensor-add", &sum.data.iter().map(|&v| v as f32).collect::<Vec<_>>(), &want, 1e-6, 1e-6);
    for (kernel, flags) in [("softmax", vec!["--x", "a.npy"]), ("matmul", vec!["--a-t", "a.npy", "--b", "b.npy"])] {
        let o = nki_in(&dir, &[&["profile", kernel][..], &flags].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        match kernel {
            "softmax" => assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("estimated time"), "{err}"),
            _ => assert!(o.status.code() == Some(2) && err.contains("multiple") && err.contains("--a-t a.npy"), "{err}"),
        }
    }
    // The Mamba tutorial's v3 with two time tiles: its result goes to --out.
    for (name, shape) in [("delta", [1, 128, 256]), ("u", [1, 128, 256]), ("b", [1, 2, 256]), ("c", [1, 2, 256])] {
        write(&dir, &format!("{name}.npy"), &shape, 3);
    }
    write(&dir, "a.npy", &[128, 2], 4);
    let flags = [
        "--delta",
        "delta.npy",
        "--u",
        "u.npy",
        "--a",
        "a.npy",
        "--b",
        "b.npy",
        "--c",
        "c.npy",
        "--seq-tile",
        "128",
        "--out",
        "y",
        "--lnc",
        "1",
    ];
    std::fs::create_dir(dir.join("y")).unwrap();
    let o = nki_in(&dir, &[&["profile", "mamba-v3", "--json"][..], &flags].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let default: Value = serde_json::from_slice(&o.stdout).unwrap();
    check_report(&default, 1);
    assert_eq!(nki::io::npy::read_npy(dir.join("y/out0.npy")).unwrap().shape, vec![1, 128, 256]);
    // Under the stack allocator the second time tile reuses the first one's
    // buffers and waits for them: no faster than with a buffer per tile.
    let o = nki_in(&dir, &[&["profile", "mamba-v3", "--json", "--allocator", "stack"][..], &flags].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stack: Value = serde_json::from_slice(&o.stdout).unwrap();
    check_report(&stack, 1);
    let time = |r: &Value| r["estimated_seconds"].as_f64().unwrap();
    assert!(time(&stack) >= time(&default), "stack {} vs default {}", time(&stack), time(&default));
}
