//! The loop forms in kernels: the trace-time ranges (`nl::affine_range`,
//! `sequential_range`, `static_range`), the device loops with run-time trip
//! counts (`nl::dynamic_range`, `nl::fori_loop`, `nl::while_loop`) and
//! `nl::no_reorder` regions. Each kernel is run by the emulator and, emitted, by
//! the NumPy executor; both are compared with a reference written from the
//! documented semantics (Python `range`, `while r != 0: r = body(r)`).

use crate::common;

use crate::common::{Arg, assert_close, tensor, uniform};
use nki::prelude::*;

/// The outputs of `kernel`, emitted alone, under the NumPy executor.
fn numpy(info: &'static nki::emit::FunctionInfo, args: Vec<Arg>) -> Vec<Vec<f32>> {
    let pkg = common::package_of(&format!("{}_pkg", info.name), &[info]);
    common::run_numpy_ranks(&pkg, info.name, &[args], 1, "fp32").swap_remove(0)
}

/// Python's `range(start, stop, step)` for a positive step.
fn py_range(start: i64, stop: i64, step: i64) -> Vec<i64> {
    (start..stop.max(start)).step_by(step as usize).collect()
}

/// Adds column block `j` of `x` `[128, 4 * 8]` into the same block of the output
/// once per visit of `j` by three trace-time ranges, called positionally and by keyword.
#[nki_kernel]
pub fn trace_ranges(x: Hbm) -> Hbm {
    let t = nl::ndarray([128, 32], nl::float32);
    nisa::dma_copy(t, x);
    let acc = nl::ndarray([128, 32], nl::float32);
    nisa::memset(acc, 0.0);
    for j in nl::affine_range(4) {
        nisa::tensor_tensor(acc[s![.., j * 8..j * 8 + 8]], acc[s![.., j * 8..j * 8 + 8]], t[s![.., j * 8..j * 8 + 8]], nl::add);
    }
    for j in nl::sequential_range(start = 0, stop = 4, step = 2) {
        nisa::tensor_tensor(acc[s![.., j * 8..j * 8 + 8]], acc[s![.., j * 8..j * 8 + 8]], t[s![.., j * 8..j * 8 + 8]], nl::add);
    }
    for j in nl::static_range(3, 4) {
        nisa::tensor_tensor(acc[s![.., j * 8..j * 8 + 8]], acc[s![.., j * 8..j * 8 + 8]], t[s![.., j * 8..j * 8 + 8]], nl::add);
    }
    let out = nl::ndarray([128, 32], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn trace_time_ranges_visit_pythons_range() {
    let xs = uniform(128 * 32, 1, -1.0, 1.0);
    let mut visits = [0.0f64; 4];
    for j in py_range(0, 4, 1).into_iter().chain(py_range(0, 4, 2)).chain(py_range(3, 4, 1)) {
        visits[j as usize] += 1.0;
    }
    let want: Vec<f64> = xs.iter().enumerate().map(|(i, v)| v * visits[(i % 32) / 8]).collect();
    let x = tensor(&[128, 32], &xs, Dtype::F32);
    let got = trace_ranges::Call::new(&x).launch(&Launch::new()).unwrap();
    assert_close("emulated", &got.to_f32_vec(), &want, 1e-6, 1e-6);
    let np = numpy(&trace_ranges::INFO, vec![Arg::Tensor(vec![128, 32], xs, Dtype::F32)]);
    assert_close("numpy", &np[0], &want, 1e-6, 1e-6);
    let src = trace_ranges::NKI_SOURCE;
    assert!(src.contains("for j in nl.sequential_range(start=0, stop=4, step=2):"), "{src}");
    assert!(src.contains("for j in nl.static_range(start=3, stop=4):"), "{src}");
}

/// `[a, b]` with `a` the number of iterations of `nl::dynamic_range(n)` and `b`
/// the sum of the indices `nl::fori_loop(lower, n, .., step)` passes its body,
/// both read from the register loaded from `n` when the loops start.
#[nki_kernel]
pub fn device_loops(#[dtypes(int32)] n: Hbm, #[default(1)] lower: i64, #[default(1)] step: i64) -> Hbm {
    let n_sb = nl::ndarray([1, 1], nl::int32);
    nisa::dma_copy(n_sb, n);
    let reg = nisa::register_alloc();
    nisa::register_load(reg, n_sb);
    let one = nl::ndarray([1, 1], nl::float32);
    nisa::memset(one, 1.0);
    let res = nl::ndarray([1, 2], nl::float32);
    nisa::memset(res, 0.0);
    for _ in nl::dynamic_range(reg) {
        nisa::tensor_tensor(res[s![.., 0..1]], res[s![.., 0..1]], one, nl::add);
    }
    let idx = nl::ndarray([1, 1], nl::int32);
    let idx_f = nl::ndarray([1, 1], nl::float32);
    nl::fori_loop(
        lower,
        reg,
        |i| {
            nisa::register_store(idx, i);
            nisa::tensor_copy(idx_f, idx);
            nisa::tensor_tensor(res[s![.., 1..2]], res[s![.., 1..2]], idx_f, nl::add);
        },
        step = 2,
    );
    let out = nl::ndarray([1, 2], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, res);
    out
}

#[test]
fn dynamic_range_and_fori_loop_take_their_trip_count_from_a_register() {
    for (n, lower) in [(5i64, 1i64), (0, 0), (6, -3), (1, 4)] {
        let trips = py_range(0, n, 1).len() as f64;
        let sum: i64 = py_range(lower, n, 2).iter().sum();
        let want = [trips, sum as f64];
        let nt = tensor(&[1, 1], &[n as f64], Dtype::I32);
        let got = device_loops::Call::new(&nt).lower(lower).launch(&Launch::new()).unwrap();
        assert_close(&format!("emulated n={n} lower={lower}"), &got.to_f32_vec(), &want, 0.0, 0.0);
        let np = numpy(&device_loops::INFO, vec![Arg::Tensor(vec![1, 1], vec![n as f64], Dtype::I32), Arg::Int(lower), Arg::Int(1)]);
        assert_close(&format!("numpy n={n} lower={lower}"), &np[0], &want, 0.0, 0.0);
    }
    let src = device_loops::NKI_SOURCE;
    assert!(src.contains("for _ in nl.dynamic_range(start=0, stop=reg):"), "{src}");
    assert!(src.contains("def _loop_body_0(i):"), "{src}");
    assert!(src.contains("nl.fori_loop(lower=lower, upper=reg, body_fun=_loop_body_0, step=2)"), "{src}");
}

/// The documented flag-driven loop: `acc += val` while the count loaded from
/// `count` `[1, 1]` (decremented by the body, which reloads the condition
/// register from it) is nonzero; the adds run in a `no_reorder` region.
#[nki_kernel]
pub fn countdown(val: Hbm, #[dtypes(int32)] count: Hbm) -> Hbm {
    let v = nl::ndarray([1, 1], nl::float32);
    nisa::dma_copy(v, val);
    let acc = nl::ndarray([1, 1], nl::float32);
    nisa::memset(acc, 0.0);
    let count_sb = nl::ndarray([1, 1], nl::int32);
    nisa::dma_copy(count_sb, count);
    let one = nl::ndarray([1, 1], nl::int32);
    nisa::memset(one, 1);
    let reg = nisa::register_alloc();
    nisa::register_load(reg, count_sb);
    nl::while_loop(reg, |r| {
        nl::no_reorder(|| {
            nisa::tensor_tensor(acc, acc, v, nl::add);
            nisa::tensor_tensor(count_sb, count_sb, one, nl::subtract);
        });
        nisa::register_load(r, count_sb);
        r
    });
    let out = nl::ndarray([1, 1], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, acc);
    out
}

#[test]
fn while_loop_runs_until_the_returned_register_is_zero() {
    for count in [0i64, 1, 7] {
        let want = [0.75 * count as f64];
        let (v, c) = (tensor(&[1, 1], &[0.75], Dtype::F32), tensor(&[1, 1], &[count as f64], Dtype::I32));
        let got = countdown::Call::new(&v, &c).launch(&Launch::new()).unwrap();
        assert_close(&format!("emulated count={count}"), &got.to_f32_vec(), &want, 0.0, 0.0);
        let np = numpy(
            &countdown::INFO,
            vec![Arg::Tensor(vec![1, 1], vec![0.75], Dtype::F32), Arg::Tensor(vec![1, 1], vec![count as f64], Dtype::I32)],
        );
        assert_close(&format!("numpy count={count}"), &np[0], &want, 0.0, 0.0);
    }
    let src = countdown::NKI_SOURCE;
    assert!(src.contains("    with nl.no_reorder():\n"), "{src}");
    assert!(src.contains("        return r\n    nl.while_loop(init=reg, body_fun=_loop_body_0)"), "{src}");
}

/// A loop whose condition never becomes zero (a negative count counts away from it).
#[nki_kernel]
pub fn runaway(#[dtypes(int32)] count: Hbm) -> Hbm {
    let c = nl::ndarray([1, 1], nl::int32);
    nisa::dma_copy(c, count);
    let reg = nisa::register_alloc();
    nisa::register_load(reg, c);
    nl::while_loop(reg, |r| r);
    let out = nl::ndarray([1, 1], nl::int32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, count);
    out
}

#[test]
fn a_while_loop_that_never_ends_fails_naming_its_line() {
    let c = tensor(&[1, 1], &[-1.0], Dtype::I32);
    let err = runaway::Call::new(&c).launch(&Launch::new()).unwrap_err().to_string();
    assert!(err.contains("nl.while_loop"), "{err}");
    assert!(err.contains(&nki::nl::WHILE_LOOP_MAX_ITERATIONS.to_string()), "{err}");
    let line = include_str!("loops.rs").lines().position(|l| l.trim() == "nl::while_loop(reg, |r| r);").unwrap() + 1;
    assert!(err.contains(&format!("tests/dsl/loops.rs:{line})")), "{err}");
    // The emitted kernel fails under the NumPy executor at the same bound.
    let pkg = common::package_of("runaway_pkg", &[&runaway::INFO]);
    let args = vec![Arg::Tensor(vec![1, 1], vec![-1.0], Dtype::I32)];
    let np_err = common::try_run_numpy_ranks(&pkg, "runaway", &[args], 1, "fp32").unwrap_err();
    let bound = format!("still nonzero after {} iterations", nki::nl::WHILE_LOOP_MAX_ITERATIONS);
    assert!(err.contains(&bound) && np_err.contains(&bound), "emulator: {err}\nexecutor: {np_err}");
}

/// Stores the `[1, 4]` row tile at row `at` (a register) of `out` `[rows, 4]`.
#[nki_helper]
pub fn store_row(out: Hbm, row: Sbuf, at: Register) {
    nisa::dma_copy(out.ap([[4, 1], [1, 4]], scalar_offset = at), row);
}

/// `out` is `table` `[8, 4]` with row i, for i below the count `n` `[1, 1]`,
/// replaced by `table[i] + [i, n - i, i, table[0..i, 3].sum()]`: the index of
/// `nl::dynamic_range` read everywhere a register belongs — as the
/// `scalar_offset` of a load, stored into a tile, as the bound of a nested
/// `nl::dynamic_range` and `nl::fori_loop` (whose own index is a `scalar_offset`
/// too), copied into a register passed to a helper.
#[nki_kernel]
pub fn index_uses(table: Hbm, #[dtypes(int32)] n: Hbm) -> Hbm {
    let n_sb = nl::ndarray([1, 1], nl::int32);
    nisa::dma_copy(n_sb, n);
    let count = nisa::register_alloc();
    nisa::register_load(count, n_sb);
    let out = nl::ndarray([8, 4], nl::float32, buffer = nl::shared_hbm);
    let all = nl::ndarray([8, 4], nl::float32);
    nisa::dma_copy(all, table);
    nisa::dma_copy(out, all);
    let idx = nl::ndarray([1, 1], nl::int32);
    let idx_f = nl::ndarray([1, 1], nl::float32);
    let cell = nl::ndarray([1, 1], nl::float32);
    for i in nl::dynamic_range(count) {
        let row = nl::ndarray([1, 4], nl::float32);
        nisa::dma_copy(row, table.ap([[4, 1], [1, 4]], scalar_offset = i));
        nisa::register_store(idx, i);
        nisa::tensor_copy(idx_f, idx);
        nisa::tensor_tensor(row[s![.., 0..1]], row[s![.., 0..1]], idx_f, nl::add);
        for _ in nl::dynamic_range(i, count) {
            nisa::tensor_scalar(row[s![.., 1..2]], row[s![.., 1..2]], nl::add, 1.0);
        }
        nl::fori_loop(0, i, |k| {
            nisa::tensor_scalar(row[s![.., 2..3]], row[s![.., 2..3]], nl::add, 1.0);
            nisa::dma_copy(cell, table.ap([[4, 1], [1, 1]], offset = 3, scalar_offset = k));
            nisa::tensor_tensor(row[s![.., 3..4]], row[s![.., 3..4]], cell, nl::add);
        });
        let at = nisa::register_alloc();
        nisa::register_move(at, i);
        store_row(out, row, at);
    }
    out
}

#[test]
fn a_device_loop_index_is_read_where_a_register_belongs() {
    let table = uniform(32, 7, -2.0, 2.0);
    for n in [0i64, 3, 8] {
        let mut want = table.clone();
        for i in 0..n as usize {
            let before: f64 = (0..i).map(|k| table[k * 4 + 3]).sum();
            for (c, add) in [i as f64, (n as usize - i) as f64, i as f64, before].into_iter().enumerate() {
                want[i * 4 + c] = table[i * 4 + c] + add;
            }
        }
        let (t, nt) = (tensor(&[8, 4], &table, Dtype::F32), tensor(&[1, 1], &[n as f64], Dtype::I32));
        let got = index_uses::Call::new(&t, &nt).launch(&Launch::new()).unwrap();
        assert_close(&format!("emulated n={n}"), &got.to_f32_vec(), &want, 1e-6, 1e-6);
        let args = vec![Arg::Tensor(vec![8, 4], table.clone(), Dtype::F32), Arg::Tensor(vec![1, 1], vec![n as f64], Dtype::I32)];
        assert_close(&format!("numpy n={n}"), &numpy(&index_uses::INFO, args)[0], &want, 1e-6, 1e-6);
    }
    let src = index_uses::NKI_SOURCE;
    assert!(src.contains("for i in nl.dynamic_range(start=0, stop=count):"), "{src}");
    assert!(src.contains("for _ in nl.dynamic_range(start=i, stop=count):"), "{src}");
    assert!(src.contains("nl.fori_loop(lower=0, upper=i, body_fun=_loop_body_0)"), "{src}");
}

/// NKI kernels that read a device loop's index at trace time, as the macro
/// emitted their DSL twins in `tests/ui/macro/loop_index_*.rs` before the index was a
/// register (a Python test, an immediate computed from it, a shape), write the
/// frozen index, or give `.ap()` both dynamic offsets.
const TRACE_TIME_READS: &str = r#"import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tested(x):
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.dynamic_range(start=0, stop=4):
        if i == 0:
            nisa.dma_copy(dst=t, src=x)
    return x


@nki.jit
def arithmetic(x):
    t = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.dynamic_range(start=0, stop=4):
        nisa.dma_copy(dst=t, src=x.ap(pattern=[[8, 1], [1, 8]], offset=i * 10 + 1))
    return x


@nki.jit
def frozen(x):
    for i in nl.dynamic_range(start=0, stop=4):
        nisa.register_move(i, 3)
    return x


@nki.jit
def offsets(x):
    idx = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=idx, value=0)
    one = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=0)
    rows = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=x.ap(pattern=[[8, 128], [1, 8]], scalar_offset=one, vector_offset=idx))
    return x


@nki.jit
def trace_time(x):
    for i in nl.dynamic_range(start=0, stop=4):
        shaped = nl.ndarray((i, 8), dtype=nl.float32, buffer=nl.sbuf)
    return x
"#;

#[test]
fn reading_a_device_loop_index_at_trace_time_fails_in_both_executors_alike() {
    let pkg = common::scratch("trace_time_reads").join("nki_kernels");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("__init__.py"), TRACE_TIME_READS).unwrap();
    let ui = |case: &str| std::fs::read_to_string(common::repo_root().join(format!("tests/ui/macro/{case}.stderr"))).unwrap();
    use nki::spec::registers::{ARITHMETIC, FROZEN, OFFSETS_EXCLUSIVE, TESTED, TRACE_TIME};
    let cases = [
        ("tested", "loop_index_tested", TESTED),
        ("arithmetic", "loop_index_arithmetic", ARITHMETIC),
        ("trace_time", "loop_index_trace_time", TRACE_TIME),
        ("frozen", "loop_index_frozen", FROZEN),
        ("offsets", "vector_offset_with_scalar_offset", OFFSETS_EXCLUSIVE),
    ];
    for (kernel, case, why) in cases {
        let args = vec![Arg::Tensor(vec![128, 8], vec![0.0; 1024], Dtype::F32)];
        let err = common::try_run_numpy_ranks(&pkg, kernel, &[args], 1, "fp32").unwrap_err();
        assert!(err.contains(why), "the executor's refusal of {kernel}:\n{err}");
        assert!(ui(case).contains(&format!("error: {why}")) || ui(case).contains(&format!(": {why}")), "the macro's refusal in {case}");
    }
}

/// Rust's own loop and number forms at trace time, each column of the `[1, 8]`
/// output one of them: the digits of `(1..5).rev()`, `(0..10).rev().step_by(3)`
/// and of a loop that `continue`s past even indices and `break`s at 7; shifts
/// (`1 << 10`, `-9 >> 1` and `1 << j` over a loop); `std::f64::consts::PI`;
/// `f32::NEG_INFINITY`; and a list built over a reversed range.
#[nki_kernel]
pub fn rust_forms() -> Hbm {
    let t = nl::ndarray([1, 8], nl::float32);
    let mut order = 0;
    for j in (1..5).rev() {
        order = order * 10 + j;
    }
    let mut stepped = 0;
    for j in (0..10).rev().step_by(3) {
        stepped = stepped * 10 + j;
    }
    let mut odd = 0;
    for j in 0..10 {
        if j % 2 == 0 {
            continue;
        }
        if j == 7 {
            break;
        }
        odd = odd * 10 + j;
    }
    let mut powers = 0;
    for j in 0..4 {
        powers = powers + (1 << j);
    }
    let shifted = (1 << 10) + (-9 >> 1);
    let tens: Vec<i64> = (0..4).rev().map(|i| i * 10).collect();
    let values = [
        order as f64,
        stepped as f64,
        odd as f64,
        shifted as f64,
        powers as f64,
        std::f64::consts::PI,
        f32::NEG_INFINITY,
        (tens[0] + tens[3]) as f64,
    ];
    for k in 0..8 {
        nisa::memset(t[s![.., k..k + 1]], values[k]);
    }
    let out = nl::ndarray([1, 8], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, t);
    out
}

#[test]
fn reversed_ranges_continue_break_shifts_and_float_constants_run_as_in_rust() {
    // Each value from Rust's own semantics of the form.
    let digits = |js: Vec<i64>| js.into_iter().fold(0i64, |a, j| a * 10 + j) as f32;
    let odd: Vec<i64> = (0..10).filter(|j| j % 2 == 1).take_while(|&j| j != 7).collect();
    let want = [
        digits((1..5).rev().collect()),
        digits((0..10).rev().step_by(3).collect()),
        digits(odd),
        ((1i64 << 10) + (-9i64 >> 1)) as f32,
        15.0,
        std::f64::consts::PI as f32,
        f32::NEG_INFINITY,
        30.0,
    ];
    assert_eq!(want[..4], [4321.0, 9630.0, 135.0, 1019.0]);
    let got = rust_forms::Call::new().launch(&Launch::new()).unwrap().to_f32_vec();
    assert_eq!(got, want, "emulated");
    let np = numpy(&rust_forms::INFO, vec![]);
    assert_eq!(np[0], want, "numpy");
    let src = rust_forms::NKI_SOURCE;
    for line in [
        "for j in range(4, 0, -1):",
        "for j in range(9, -1, -3):",
        "continue",
        "break",
        "powers = powers + (1 << j)",
        "shifted = (1 << 10) + (-9 >> 1)",
        "[i * 10 for i in range(3, -1, -1)]",
        "3.141592653589793",
        "float('-inf')",
    ] {
        assert!(src.contains(line), "{line} not in\n{src}");
    }
}
