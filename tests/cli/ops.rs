//! `nki ops`: the vocabulary as a table and as JSON, checked against the official tables.

use crate::common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn nki(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).output().expect("running nki")
}

/// Runs the Python `script` with `args`, `stdin` on its standard input; asserts
/// it succeeds and returns its standard output.
fn python_on(script: &str, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut py = Command::new(common::python())
        .args(["-c", script])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running python");
    py.stdin.take().expect("stdin").write_all(stdin).expect("writing the JSON");
    let out = py.wait_with_output().expect("python finished");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
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
    let out = python_on(CHECK, &[&sigs.display().to_string()], &o.stdout);
    let counts = String::from_utf8_lossy(&out);
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

#[test]
fn ops_name_describes_one_op_with_its_defaults_rules_and_example() {
    let o = nki(&["ops", "nonzero_with_count"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).expect("utf-8");
    assert!(text.starts_with("nki.isa.nonzero_with_count: "), "{text}");
    // The official signature, with the stubs' defaults.
    assert!(text.contains("nki.isa.nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None)"), "{text}");
    assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["src", "required", "tensor", "in", "SBUF"]), "{text}");
    assert!(text.contains("engines:     gpsimd") && text.contains("generations: trn2, trn3"), "{text}");
    assert!(text.contains("partitions 0, 16, ..., 112"), "{text}");
    assert!(text.contains("nisa::nonzero_with_count(idx, mask"), "{text}");
    // The kernel spelling and the official path name the same op; the no-cast rule is listed.
    let a = nki(&["ops", "nisa::nc_transpose"]).stdout;
    assert_eq!(a, nki(&["ops", "nki.isa.nc_transpose"]).stdout);
    let a = String::from_utf8(a).expect("utf-8");
    assert!(a.contains("engine=engine.unknown") && a.contains("dst must have the dtype of data"), "{a}");
}

#[test]
fn ops_name_json_carries_params_defaults_rules_and_example() {
    let o = nki(&["ops", "nc_matmul", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = r#"
import json, sys
o = json.load(sys.stdin)
assert o["name"] == "nki.isa.nc_matmul" and o["engines"] == ["tensor"], o
p = {q["name"]: q for q in o["params"]}
assert list(p)[:3] == ["dst", "stationary", "moving"], p
assert p["dst"]["required"] and p["dst"]["default"] is None and p["dst"]["kind"] == "tensor in PSUM", p
assert p["is_transpose"]["default"] == "False" and not p["is_transpose"]["required"], p
assert any("with is_transpose, dst must have the dtype of stationary" in r for r in o["rules"]), o["rules"]
assert o["example"].startswith("nisa::nc_matmul("), o
"#;
    python_on(script, &[], &o.stdout);
}

#[test]
fn ops_name_refuses_an_unknown_or_ambiguous_name_on_one_line() {
    let o = nki(&["ops", "nonzero_with_cnt"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).expect("utf-8");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("no op named `nonzero_with_cnt`") && err.contains("did you mean `nonzero_with_count`?"), "{err}");
    assert!(o.stdout.is_empty());
    let o = nki(&["ops", "zzzzzz"]);
    assert_eq!(o.status.code(), Some(2));
    // nisa.dropout and nl.dropout: the bare name is ambiguous, the module path is not.
    let o = nki(&["ops", "dropout"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).expect("utf-8");
    assert!(err.contains("nki.isa.dropout, nki.language.dropout"), "{err}");
    assert!(nki(&["ops", "nl.dropout"]).status.success());
}
