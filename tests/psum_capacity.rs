//! PSUM holds 8 banks per program and every PSUM tensor takes at least one: a
//! DSL kernel holding 8 live one-column PSUM tiles runs, and the same kernel with a
//! ninth fails with a capacity error naming the tensor and the banks in use —
//! in the emulator and, from the emitted NKI source, in the NumPy executor alike.

mod common;

use nki::ErrorKind;
use nki::prelude::*;

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
    for part in [
        "nl.ndarray (tests/psum_capacity.rs:",
        "PSUM capacity exceeded: tensor 't8' needs 1 bank (4 B per partition",
        "8 of the 8 banks are in use: 't0' (1 bank), 't1' (1 bank)",
        "'t7' (1 bank)",
    ] {
        assert!(e.to_string().contains(part), "{part:?} missing from: {e}");
    }

    let pkg = common::package_of("psum_tiles_pkg", &[&psum_tiles::INFO]);
    let (ok, out, err) = common::harness(&["check", &pkg.display().to_string()]);
    assert!(ok, "{out}{err}");
    let np = common::run_numpy_ranks(&pkg, "psum_tiles", &[vec![common::Arg::Int(8)]], 2, "fp32");
    assert_eq!(np[0][0], want);
    let np_err = common::try_run_numpy_ranks(&pkg, "psum_tiles", &[vec![common::Arg::Int(9)]], 1, "fp32").unwrap_err();
    for part in ["PSUM capacity exceeded: tensor 't8' needs 1 bank (4 B per partition", "8 of the 8 banks are in use: 't0' (1 bank)"] {
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
