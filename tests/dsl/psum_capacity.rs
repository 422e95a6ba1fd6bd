//! PSUM holds 8 banks per program and a PSUM tile holds at least one from its
//! first to its last use: a DSL kernel with 8 one-column tiles live at once runs,
//! the same kernel with a ninth fails with a capacity error naming the tensor, the
//! tiles live with it and the lines; a kernel with more tiles over its lifetime
//! than banks runs when at most 8 are live; tiles placed at one bank address
//! share it (a write through one is read through the other) and a write over
//! bytes another tile still reads is a hazard naming both tiles — in the emulator
//! and, from the emitted NKI source, in the NumPy executor alike.

use crate::common;

use nki::ErrorKind;
use nki::prelude::*;

/// `tests/dsl/psum_capacity.rs:N)`: where the first line of this file holding
/// `code` is, as errors name kernel lines.
fn line_of(code: &str) -> String {
    let n = include_str!("psum_capacity.rs").lines().position(|l| l.contains(code)).expect("the code is in this file");
    format!("{}:{})", file!(), n + 1)
}

/// Sets PSUM tile `i` to `i` for `n` (8 or 9) one-column tiles that are all live at
/// once, and returns their sum on every partition.
#[nki_kernel]
pub fn psum_tiles(n: i64) -> Hbm {
    let acc = nl::ndarray([128, 1], nl::float32);
    nisa::memset(acc, 0.0);
    let t0 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t0");
    nisa::memset(t0, 0.0);
    let t1 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t1");
    nisa::memset(t1, 1.0);
    let t2 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t2");
    nisa::memset(t2, 2.0);
    let t3 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t3");
    nisa::memset(t3, 3.0);
    let t4 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t4");
    nisa::memset(t4, 4.0);
    let t5 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t5");
    nisa::memset(t5, 5.0);
    let t6 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t6");
    nisa::memset(t6, 6.0);
    let t7 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t7");
    nisa::memset(t7, 7.0);
    if n > 8 {
        let t8 = nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "t8");
        nisa::memset(t8, 8.0);
        nisa::tensor_tensor(acc, acc, t8, nl::add);
    }
    nisa::tensor_tensor(acc, acc, t0, nl::add);
    nisa::tensor_tensor(acc, acc, t1, nl::add);
    nisa::tensor_tensor(acc, acc, t2, nl::add);
    nisa::tensor_tensor(acc, acc, t3, nl::add);
    nisa::tensor_tensor(acc, acc, t4, nl::add);
    nisa::tensor_tensor(acc, acc, t5, nl::add);
    nisa::tensor_tensor(acc, acc, t6, nl::add);
    nisa::tensor_tensor(acc, acc, t7, nl::add);
    let out = nl::ndarray([128, 1], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn eight_live_psum_tiles_fit_and_a_ninth_fails_in_both_executors() {
    // 0 + 1 + ... + 7 on every partition.
    let want = vec![28.0f32; 128];
    let report = Launch::new().lnc(2).run_all(|ctx| psum_tiles::Call::new(8).run(ctx)).unwrap();
    assert_eq!(report.results[0][0].to_f32_vec(), want);
    for m in &report.memory[0] {
        assert_eq!((m.psum_peak_banks, m.psum_peak_bytes), (8, 8 * 2048));
    }

    let e = psum_tiles::Call::new(9).launch(&Launch::new()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Capacity, "{e}");
    // The overlap is proven where the last early tile is read again (line 45).
    let capacity = [
        "PSUM capacity exceeded: tensor 't8' needs 1 bank (4 B per partition",
        "8 of the 8 banks are in use: 't0' (1 bank), 't1' (1 bank)",
        "'t7' (1 bank)",
        "'t8' is first used at nisa.memset (",
    ];
    // The kernel lines: where 't8' is first used, and where the overlap is proven
    // (the last early tile read again).
    let lines = [
        format!("first used at nisa.memset ({}", line_of("nisa::memset(t8, 8.0)")),
        format!("nisa.tensor_tensor ({}", line_of("acc, t7, nl::add")),
    ];
    for part in capacity.iter().copied().chain(lines.iter().map(String::as_str)) {
        assert!(e.to_string().contains(part), "{part:?} missing from: {e}");
    }

    let pkg = common::package_of("psum_tiles_pkg", &[&psum_tiles::INFO, &psum_lifetimes::INFO, &psum_placed::INFO]);
    let (ok, out, err) = common::harness(&["check", &pkg.display().to_string()]);
    assert!(ok, "{out}{err}");
    let np = common::run_numpy_ranks(&pkg, "psum_tiles", &[vec![common::Arg::Int(8)]], 2, "fp32");
    assert_eq!(np[0][0], want);
    let np_err = common::try_run_numpy_ranks(&pkg, "psum_tiles", &[vec![common::Arg::Int(9)]], 1, "fp32").unwrap_err();
    for part in capacity.iter().copied().chain(["first used at nisa.memset (psum_capacity.py:"]) {
        assert!(np_err.contains(part), "{part:?} missing from: {np_err}");
    }
}

/// Holds 7 PSUM banks the whole kernel, and takes `n` more tiles one after the
/// other, each dead after its read: `n + 7` PSUM tiles, at most 8 banks live.
#[nki_kernel]
pub fn psum_lifetimes(n: i64) -> Hbm {
    let acc = nl::ndarray([128, 1], nl::float32);
    nisa::memset(acc, 0.0);
    let h6 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h6");
    let h0 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h0");
    let h1 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h1");
    let h2 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h2");
    let h3 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h3");
    let h4 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h4");
    let h5 = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "h5");
    nisa::memset(h6[s![.., 0..1]], 1.0);
    nisa::memset(h0[s![.., 0..1]], 1.0);
    nisa::memset(h1[s![.., 0..1]], 1.0);
    nisa::memset(h2[s![.., 0..1]], 1.0);
    nisa::memset(h3[s![.., 0..1]], 1.0);
    nisa::memset(h4[s![.., 0..1]], 1.0);
    nisa::memset(h5[s![.., 0..1]], 1.0);
    for i in 0..n {
        let step = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "step");
        nisa::memset(step[s![.., 0..1]], 2.0);
        nisa::tensor_tensor(acc, acc, step[s![.., 0..1]], nl::add);
    }
    nisa::tensor_tensor(acc, acc, h6[s![.., 0..1]], nl::add);
    nisa::tensor_tensor(acc, acc, h0[s![.., 0..1]], nl::add);
    nisa::tensor_tensor(acc, acc, h1[s![.., 0..1]], nl::add);
    nisa::tensor_tensor(acc, acc, h2[s![.., 0..1]], nl::add);
    nisa::tensor_tensor(acc, acc, h3[s![.., 0..1]], nl::add);
    nisa::tensor_tensor(acc, acc, h4[s![.., 0..1]], nl::add);
    nisa::tensor_tensor(acc, acc, h5[s![.., 0..1]], nl::add);
    let out = nl::ndarray([128, 1], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn more_psum_tiles_over_the_lifetime_than_banks_run_in_both_executors() {
    let (n, want) = (20, vec![20.0 * 2.0 + 7.0; 128]);
    let report = Launch::new().run_all(|ctx| psum_lifetimes::Call::new(n).run(ctx)).unwrap();
    assert_eq!(report.results[0][0].to_f32_vec(), want);
    assert_eq!(report.memory[0][0].psum_peak_banks, 8);
    let pkg = common::package_of("psum_lifetimes_pkg", &[&psum_lifetimes::INFO]);
    assert_eq!(common::run_numpy_ranks(&pkg, "psum_lifetimes", &[vec![common::Arg::Int(n)]], 1, "fp32")[0][0], want);
}

/// Two PSUM tiles at bank 2: `first` is set to 1, `second` to 2 over its first
/// `cols` columns, then `first` is read. With `cols` 0 nothing overlaps; otherwise
/// `second` clobbered bytes `first` wrote. `alias` reads bank 2 through a third
/// tile that never wrote it: what `second` wrote.
#[nki_kernel]
pub fn psum_placed(cols: i64) -> Hbm {
    let first = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "first", address = (0, 2 * 2048));
    let second = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "second", address = (0, 2 * 2048));
    let alias = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, name = "alias", address = (0, 2 * 2048));
    nisa::memset(first, 1.0);
    if cols > 0 {
        nisa::memset(second[s![.., 0..cols]], 2.0);
    }
    let out = nl::ndarray([128, 2], nl::float32, buffer = nl::shared_hbm);
    let res = nl::ndarray([128, 2], nl::float32);
    nisa::tensor_copy(res[s![.., 1..2]], alias[s![.., 511..512]]);
    nisa::tensor_copy(res[s![.., 0..1]], first[s![.., 0..1]]);
    nisa::dma_copy(out, res);
    out
}

#[test]
fn placed_psum_tiles_alias_and_a_clobber_is_a_hazard_in_both_executors() {
    let pkg = common::package_of("psum_placed_pkg", &[&psum_placed::INFO]);
    // No overlap: `alias` reads `first`'s value through the shared bank.
    let want: Vec<f32> = (0..128).flat_map(|_| [1.0, 1.0]).collect();
    assert_eq!(psum_placed::Call::new(0).launch(&Launch::new()).unwrap().to_f32_vec(), want);
    assert_eq!(common::run_numpy_ranks(&pkg, "psum_placed", &[vec![common::Arg::Int(0)]], 1, "fp32")[0][0], want);
    // `second` overwrites column 0 of `first` before it is read.
    let parts = [
        "reads 'first' (address (0, 4096)) [128, 512] float32, but bytes it wrote (at nisa.memset (",
        "were overwritten through 'second' (address (0, 4096)) [128, 512] float32 (at nisa.memset (",
    ];
    let lines = [
        format!("nisa.tensor_copy ({} reads 'first'", line_of("first[s![.., 0..1]]);")),
        format!("wrote (at nisa.memset ({})", line_of("nisa::memset(first, 1.0)")),
        format!("float32 (at nisa.memset ({})", line_of("nisa::memset(second[s![.., 0..cols]], 2.0)")),
    ];
    let e = psum_placed::Call::new(4).launch(&Launch::new()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Hazard, "{e}");
    let np_err = common::try_run_numpy_ranks(&pkg, "psum_placed", &[vec![common::Arg::Int(4)]], 1, "fp32").unwrap_err();
    for part in parts.iter().copied().chain(lines.iter().map(String::as_str)) {
        assert!(e.to_string().contains(part), "{part:?} missing from: {e}");
    }
    for part in parts.iter().copied().chain([
        "nisa.tensor_copy (psum_capacity.py:",
        "wrote (at nisa.memset (psum_capacity.py:",
        "float32 (at nisa.memset (psum_capacity.py:",
    ]) {
        assert!(np_err.contains(part), "{part:?} missing from: {np_err}");
    }
}

/// [`psum_tiles`] with its `n` tiles in a list (`(0..n).map(..).collect()`):
/// each element is an allocation of its own and leases its own bank.
#[nki_kernel]
pub fn psum_list(n: i64) -> Hbm {
    let tiles: Vec<Psum> = (0..n).map(|k| nl::ndarray([128, 1], nl::float32, buffer = nl::psum, name = "listed")).collect();
    for k in 0..n {
        nisa::memset(tiles[k], k as f64);
    }
    let acc = nl::ndarray([128, 1], nl::float32);
    nisa::memset(acc, 0.0);
    for k in 0..n {
        nisa::tensor_tensor(acc, acc, tiles[k], nl::add);
    }
    let out = nl::ndarray([128, 1], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn psum_tiles_in_a_list_lease_a_bank_each_in_both_executors() {
    let report = Launch::new().run_all(|ctx| psum_list::Call::new(8).run(ctx)).unwrap();
    assert_eq!(report.results[0][0].to_f32_vec(), vec![28.0f32; 128]);
    assert_eq!(report.memory[0][0].psum_peak_banks, 8);
    let e = psum_list::Call::new(9).launch(&Launch::new()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Capacity, "{e}");
    let full = "8 of the 8 banks are in use: 'listed' (1 bank)";
    assert!(e.to_string().contains(full), "{e}");

    let pkg = common::package_of("psum_list_pkg", &[&psum_list::INFO]);
    assert!(psum_list::NKI_SOURCE.contains("for k in range(n)]"), "{}", psum_list::NKI_SOURCE);
    let np = common::run_numpy_ranks(&pkg, "psum_list", &[vec![common::Arg::Int(8)]], 1, "fp32");
    assert_eq!(np[0][0], vec![28.0f32; 128]);
    let np_err = common::try_run_numpy_ranks(&pkg, "psum_list", &[vec![common::Arg::Int(9)]], 1, "fp32").unwrap_err();
    assert!(np_err.contains("PSUM capacity exceeded") && np_err.contains(full), "{np_err}");
}
