//! The emitted Python of every registered kernel is checked in under
//! `tests/snapshots/nki_kernels/`, so changes to it show up in review. Regenerate
//! with `NKI_UPDATE_SNAPSHOTS=1 cargo test --test emit_snapshots`.

mod common;

use std::collections::BTreeMap;

#[test]
fn emitted_package_matches_snapshots() {
    let dir = common::repo_root().join("tests/snapshots/nki_kernels");
    let pkg = nki::emit::Package::new(&nki::registry()).expect("packaging the registry");
    if std::env::var_os("NKI_UPDATE_SNAPSHOTS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        pkg.write_to(&dir).expect("writing snapshots");
    }
    let on_disk: BTreeMap<String, String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run with NKI_UPDATE_SNAPSHOTS=1 to create it)", dir.display()))
        .map(|e| {
            let p = e.expect("a snapshot entry").path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).expect("reading a snapshot"))
        })
        .collect();
    let emitted: Vec<&String> = pkg.files().keys().collect();
    let stored: Vec<&String> = on_disk.keys().collect();
    assert_eq!(emitted, stored, "the emitted files differ from the snapshot files");
    for (name, text) in pkg.files() {
        let old = &on_disk[name];
        if old != text {
            let line = old.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(old.lines().count().min(text.lines().count()));
            panic!(
                "{name} differs from its snapshot at line {}:\n  snapshot: {:?}\n  emitted:  {:?}\nreview the change, then run NKI_UPDATE_SNAPSHOTS=1 cargo test --test emit_snapshots",
                line + 1,
                old.lines().nth(line).unwrap_or("<end>"),
                text.lines().nth(line).unwrap_or("<end>")
            );
        }
    }
}
