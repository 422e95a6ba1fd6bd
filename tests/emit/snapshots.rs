//! The emitted Python of every registered kernel is checked in under
//! `tests/snapshots/nki_kernels/` (all of the package but the contract
//! helper's module, a copy of its source), so changes to it show up in
//! review. Regenerate with `NKI_UPDATE_SNAPSHOTS=1 cargo test --test emit`.

use crate::common;

use std::collections::BTreeMap;

#[test]
fn emitted_package_matches_snapshots() {
    let dir = common::repo_root().join("tests/snapshots/nki_kernels");
    let pkg = nki::emit::Package::new(&nki::registry()).expect("packaging the registry");
    // The contract helper's module is its Python source under the package's
    // header: review sees it in `nki-core/src/emit/kernel_contract.py`, so no
    // copy is kept here.
    let helper = &nki::emit::CHECK_CONTRACT;
    let copied = format!("{}.py", helper.python_module());
    assert!(pkg.files()[&copied].ends_with(&format!("\n\n\n{}", helper.source)), "{copied} is not the helper's source");
    if std::env::var_os("NKI_UPDATE_SNAPSHOTS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        pkg.write_to(&dir).expect("writing snapshots");
        std::fs::remove_file(dir.join(&copied)).expect("removing the helper's copy");
    }
    let on_disk: BTreeMap<String, String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run with NKI_UPDATE_SNAPSHOTS=1 to create it)", dir.display()))
        .map(|e| {
            let p = e.expect("a snapshot entry").path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).expect("reading a snapshot"))
        })
        .collect();
    let emitted: Vec<&String> = pkg.files().keys().filter(|name| **name != copied).collect();
    let stored: Vec<&String> = on_disk.keys().collect();
    assert_eq!(emitted, stored, "the emitted files differ from the snapshot files");
    for (name, text) in pkg.files().iter().filter(|(name, _)| **name != copied) {
        let old = &on_disk[name];
        if old != text {
            let line = old.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(old.lines().count().min(text.lines().count()));
            panic!(
                "{name} differs from its snapshot at line {}:\n  snapshot: {:?}\n  emitted:  {:?}\nreview the change, then run NKI_UPDATE_SNAPSHOTS=1 cargo test --test emit",
                line + 1,
                old.lines().nth(line).unwrap_or("<end>"),
                text.lines().nth(line).unwrap_or("<end>")
            );
        }
    }
}

/// The NumPy executor's hardware limits (`fake_nki/hw_limits.json`) are the spec's
/// (`nki_spec::hw`), rendered per generation; regenerate with the same variable.
#[test]
fn executor_hw_limits_are_the_specs() {
    let path = common::repo_root().join("tests/python/nki_harness/fake_nki/hw_limits.json");
    let mut gens = serde_json::Map::new();
    for g in nki::hw::Generation::ALL {
        let hw = g.limits();
        let limits = serde_json::json!({
            "nc_version": g.nc_version(),
            "pmax": hw.pmax,
            "sbuf_partition_bytes": hw.sbuf_bytes_per_partition,
            "psum_banks": hw.psum_banks,
            "psum_bank_bytes": hw.psum_bank_bytes,
            "gemm_stationary_fmax": hw.gemm_stationary_fmax,
            "gemm_moving_fmax": hw.gemm_moving_fmax,
            "gemm_moving_fmax_bf16_dst": hw.gemm_moving_fmax_bf16_dst,
            "bn_stats_fmax": nki::nl::tile_size::bn_stats_fmax,
            // `nl.tile_size.gemm_moving_fmax` is 512 on every generation (the
            // library's trn3 kernels size PSUM tiles by it); trn3's PE takes wider
            // moving operands, the `gemm_moving_fmax` limit above.
            "tile_gemm_moving_fmax": nki::nl::tile_size::gemm_moving_fmax,
            "pe_transpose_max": hw.pe_transpose_max,
            "vector_transpose_max": hw.vector_transpose_max,
            "has_range_select": hw.has_range_select,
            "has_core_barrier": hw.has_core_barrier,
            "has_bf16_psum": hw.has_bf16_psum,
            "has_scalar_activation_bias": hw.has_scalar_activation_bias,
            "has_accumulate_onto_non_matmul_psum": hw.has_accumulate_onto_non_matmul_psum,
        });
        gens.insert(g.to_string(), limits);
    }
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(gens)).expect("rendering the limits") + "\n";
    if std::env::var_os("NKI_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &text).expect("writing the executor's limits");
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(stored == text, "{} is not the spec's limits; run NKI_UPDATE_SNAPSHOTS=1 cargo test --test emit", path.display());
}
