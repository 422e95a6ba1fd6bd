//! `nki ops`: the vocabulary as a table and as JSON, checked against the official tables.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn nki(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).output().expect("running nki")
}

/// Python that reads `nki ops --json` on stdin and checks it against the official names.
const CHECK: &str = r#"
import json, sys
ops = json.load(sys.stdin)
sigs = json.load(open(sys.argv[1]))
names = [o["name"] for o in ops]
assert len(names) == len(set(names)), "duplicate names"
for o in ops:
    assert set(o) == {"name", "engines", "generations", "summary", "status"}, o
    assert o["status"] in ("implemented", "planned"), o
    assert o["generations"] and set(o["generations"]) <= {"trn1", "trn2", "trn3"}, o
    assert set(o["engines"]) <= {"tensor", "vector", "scalar", "gpsimd", "dma", "sync"}, o
    assert o["summary"].strip(), o
walked = [k for k in sigs if k.split(".")[1] in ("isa", "language", "collectives") and not k.startswith("nki.isa.NkiInstruction")]
missing = [k for k in walked if k not in names]
assert not missing, missing
bn = next(o for o in ops if o["name"] == "nki.isa.bn_stats")
assert bn["engines"] == ["vector"], bn
mx = next(o for o in ops if o["name"] == "nki.isa.nc_matmul_mx")
assert mx["generations"] == ["trn3"], mx
print(len(ops), sum(o["status"] == "implemented" for o in ops))
"#;

#[test]
fn ops_json_lists_every_official_function_and_method_with_its_fields() {
    let o = nki(&["ops", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sigs = common::repo_root().join("tests/data/nki-api-signatures.json");
    let mut py = Command::new(common::python())
        .args(["-c", CHECK, &sigs.display().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running python");
    py.stdin.take().expect("stdin").write_all(&o.stdout).expect("writing the JSON");
    let out = py.wait_with_output().expect("python finished");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let counts = String::from_utf8_lossy(&out.stdout);
    let (total, implemented) = counts.trim().split_once(' ').expect("two counts");
    assert!(total.parse::<usize>().unwrap() > 180, "{counts}");
    assert!(implemented.parse::<usize>().unwrap() > 30, "{counts}");
}

#[test]
fn ops_table_has_one_line_per_op_and_filters_the_implemented_ones() {
    let all = String::from_utf8(nki(&["ops"]).stdout).expect("utf-8");
    let line = all.lines().find(|l| l.starts_with("nki.language.NkiTensor.permute ")).expect("permute is listed");
    assert!(line.contains("view") || line.contains("dims"), "{line}");
    let dma = all.lines().find(|l| l.starts_with("nki.isa.dma_copy ")).expect("dma_copy is listed");
    assert!(dma.contains("dma") && dma.contains("trn1,trn2,trn3") && dma.contains("implemented"), "{dma}");
    let implemented = String::from_utf8(nki(&["ops", "--implemented"]).stdout).expect("utf-8");
    // No official op is planned any more, so the filter keeps every line.
    assert_eq!(implemented.lines().count(), all.lines().count());
    assert!(implemented.lines().all(|l| l.contains(" implemented ")), "{implemented}");
    assert!(implemented.contains("nki.isa.nc_matmul "));
}

#[test]
fn help_lists_ops() {
    let help = String::from_utf8(nki(&["--help"]).stdout).expect("utf-8");
    assert!(help.lines().any(|l| l.trim_start().starts_with("ops ")), "{help}");
}

#[test]
fn ops_rejects_an_unknown_flag_with_exit_code_2() {
    let o = nki(&["ops", "--jsn"]);
    assert_eq!(o.status.code(), Some(2));
}
