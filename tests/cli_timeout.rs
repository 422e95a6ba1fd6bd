//! `nki run --timeout SECS`: a run that finishes in time writes the same output as
//! an unbounded one; a run past its limit (which bounds the whole command,
//! reading included) fails with a one-line error naming every rank and LNC
//! program's op and kernel line; a limit that is not a
//! positive, finite number of seconds is a usage error (exit 2) on one line.

mod common;

use nki::io::npy::{NpyType, read_npy, write_npy};
use std::path::Path;
use std::process::{Command, Output};

fn nki_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).output().expect("running nki")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `q.npy`, `k.npy`, `v.npy` of shape `[1, bh, s, d]`; returns their paths.
fn inputs(dir: &Path, bh: usize, s: usize, d: usize) -> Vec<String> {
    ["q", "k", "v"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let p = dir.join(format!("{n}.npy"));
            write_npy(&p, &[1, bh, s, d], &common::uniform(bh * s * d, 90 + i as u64, -1.0, 1.0), NpyType::F32).unwrap();
            p.display().to_string()
        })
        .collect()
}

fn ring_fwd(qkv: &[String], out: &Path, extra: &[&str]) -> Output {
    let out = out.display().to_string();
    let mut args = vec!["run", "ring-fwd", "--q", &qkv[0], "--k", &qkv[1], "--v", &qkv[2], "--workers", "4", "--lnc", "2", "--out", &out];
    args.extend_from_slice(extra);
    nki_cmd(&args)
}

#[test]
fn a_run_within_its_limit_writes_what_an_unbounded_run_writes() {
    let dir = common::scratch("cli_timeout_ok");
    let qkv = inputs(&dir, 1, 512, 32);
    let (plain, bounded) = (dir.join("plain.npy"), dir.join("bounded.npy"));
    let o = ring_fwd(&qkv, &plain, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ring_fwd(&qkv, &bounded, &["--timeout", "120"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (a, b) = (read_npy(&plain).unwrap(), read_npy(&bounded).unwrap());
    assert_eq!(b.shape, vec![1, 1, 512, 32]);
    assert_eq!(a.data, b.data);
}

#[test]
fn a_run_past_its_limit_names_every_program_on_one_line() {
    // A run that takes far longer than the half-second limit (reading its inputs does not).
    let dir = common::scratch("cli_timeout_late");
    let qkv = inputs(&dir, 2, 8192, 128);
    let out = dir.join("o.npy");
    let o = ring_fwd(&qkv, &out, &["--timeout", "0.5"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    // The command's limit, then the launch's report with what was left of it.
    assert!(err.starts_with("error: the command did not finish within 500ms (--timeout): the launch did not finish within "), "{err}");
    assert!(err.contains("; each program at the deadline: "), "{err}");
    for r in 0..4 {
        for p in 0..2 {
            let who = format!("[rank {r} program {p}] ");
            let at = err.find(&who).unwrap_or_else(|| panic!("{who:?} missing from: {err}"));
            let state = &err[at + who.len()..];
            assert!(
                state.starts_with("finished") || state.contains("nki-attention/src/") && state.contains(".rs:"),
                "rank {r} program {p} is reported without its kernel line: {err}"
            );
        }
    }
    assert!(!out.exists(), "a run that timed out wrote its output");
}

#[test]
fn a_limit_that_is_not_a_positive_number_of_seconds_is_a_usage_error() {
    let dir = common::scratch("cli_timeout_bad");
    let qkv = inputs(&dir, 1, 512, 32);
    let out = dir.join("o.npy");
    let rule = "the time limit must be a positive, finite number of seconds";
    for (value, why) in [("0", rule), ("-1", rule), ("NaN", rule), ("inf", rule), ("1e-12", rule), ("soon", "expected a number of seconds")]
    {
        let o = ring_fwd(&qkv, &out, &["--timeout", value]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "--timeout {value}: {err}");
        // The error is its first line; clap adds only its pointer to --help.
        let mut lines = err.lines().filter(|l| !l.trim().is_empty());
        assert_eq!(lines.next(), Some(format!("error: invalid value '{value}' for '--timeout <SECS>': {why}").as_str()), "{err}");
        assert!(lines.all(|l| l.contains("--help")), "more than one line of error: {err}");
    }
    assert!(!out.exists());
}
