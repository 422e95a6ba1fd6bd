//! The emitted package only uses names of the official NKI 2.32 API, with keyword
//! arguments that exist (checked by the Python harness against the signature
//! tables in `tests/data/`), and the harness itself rejects a kernel that does not.

use crate::common;

#[test]
fn every_emitted_call_matches_the_official_signatures() {
    let pkg = common::emitted_package().display().to_string();
    let (ok, stdout, stderr) = common::harness(&["check", &pkg]);
    assert!(ok, "signature check failed:\n{stdout}\n{stderr}");
}

#[test]
fn the_check_catches_an_unknown_keyword_and_name() {
    let dir = common::scratch("bad_pkg");
    std::fs::write(dir.join("__init__.py"), "").unwrap();
    std::fs::write(
        dir.join("bad.py"),
        "import nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n@nki.jit\ndef k(a):\n    t = nl.ndarray(shape=(128, 4), dtype=nl.float32, buffer=nl.sbuff)\n    nisa.dma_copy(dst=t, source=a)\n    return t\n",
    )
    .unwrap();
    let (ok, stdout, _) = common::harness(&["check", &dir.display().to_string()]);
    assert!(!ok, "the check accepted a bad kernel");
    assert!(stdout.contains("nl.sbuff") && stdout.contains("source"), "{stdout}");
}
