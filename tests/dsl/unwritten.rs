//! Reads of memory nothing wrote: a kernel that copies an SBUF tile it filled
//! only partly reads zero bits for the rest, and the launch reports the read
//! (the tensor, the instruction and the kernel line) as undefined behaviour, or
//! fails under strict mode — in the emulator and, from the emitted NKI source,
//! in the NumPy executor alike. A kernel that writes everything it reads
//! reports nothing. `NKI_STRICT_UNINIT=1` turns strict mode on in both; the
//! warning cases here set their mode explicitly, so the suite runs under it too.

use crate::common;

use nki::ErrorKind;
use nki::prelude::*;

/// `tests/dsl/unwritten.rs:N`: the first line of this file holding `code`.
fn line_of(code: &str) -> String {
    let n = include_str!("unwritten.rs").lines().position(|l| l.contains(code)).expect("the code is in this file");
    format!("{}:{}", file!(), n + 1)
}

/// `x` `[P, F]` into the first `F` columns of a `[P, F + 2]` tile; the whole tile
/// out, doubled. With `fill`, the last two columns are set to 1 first.
#[nki_kernel]
pub fn padded_tile(x: Hbm, fill: bool) -> Hbm {
    let [p, f] = x.shape();
    let wide = nl::ndarray([p, f + 2], nl::float32, name = "wide");
    if fill {
        nisa::memset(wide[s![.., f..f + 2]], 1.0);
    }
    nisa::dma_copy(wide[s![.., 0..f]], x);
    let doubled = nl::ndarray([p, f + 2], nl::float32);
    nisa::tensor_scalar(doubled, wide, nl::multiply, 2.0); // reads the unwritten columns
    let out = nl::ndarray([p, f + 2], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, doubled);
    out
}

fn expected(x: &[f64], p: usize, f: usize, pad: f32) -> Vec<f32> {
    (0..p).flat_map(|r| (0..f + 2).map(move |c| if c < f { 2.0 * x[r * f + c] as f32 } else { 2.0 * pad })).collect()
}

#[test]
fn a_read_of_unwritten_sbuf_is_reported_and_reads_zero_in_both_executors() {
    let (p, f) = (8usize, 3usize);
    let x: Vec<f64> = (0..p * f).map(|i| i as f64 - 5.0).collect();
    let xt = common::tensor(&[p, f], &x, Dtype::F32);
    let want = expected(&x, p, f, 0.0);
    let lenient = Launch::new().strict_uninit(false);
    let report = lenient.run_all(|ctx| padded_tile::Call::new(&xt, false).run(ctx)).unwrap();
    assert_eq!(report.results[0][0].to_f32_vec(), want);
    let site = format!("nisa.tensor_scalar ({})", line_of("// reads the unwritten columns"));
    let text = "reads 16 elements of 'wide' [8, 5] float32 in SBUF that nothing wrote since it was allocated (the first at [0, 3])";
    assert_eq!(report.undefined.len(), 1, "{:?}", report.undefined);
    assert_eq!(
        report.undefined[0],
        format!("undefined behaviour: {site} {text}; on hardware they hold whatever the memory held, here they read as zero bits")
    );

    let e = padded_tile::Call::new(&xt, false).launch(&Launch::new().strict_uninit(true)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Undefined, "{e}");
    assert!(e.to_string().starts_with(&format!("{site}: undefined behaviour: the instruction {text}")), "{e}");

    let filled = Launch::new().run_all(|ctx| padded_tile::Call::new(&xt, true).run(ctx)).unwrap();
    assert_eq!(filled.results[0][0].to_f32_vec(), expected(&x, p, f, 1.0));
    assert_eq!(filled.undefined, Vec::<String>::new());

    let pkg = common::package_of("unwritten_pkg", &[&padded_tile::INFO]);
    let args = |fill| vec![(vec![common::Arg::Tensor(vec![p, f], x.clone(), Dtype::F32), common::Arg::Bool(fill)], Vec::new())];
    let run = common::with_strict_uninit(false, || common::spec_run(&pkg, "padded_tile", &args(false), 1, "fp32", "trn2"));
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(common::as_f32(run.outputs("padded_tile", 1))[0][0], want);
    let module = std::fs::read_to_string(pkg.join("unwritten.py")).expect("the emitted module");
    let np_line = module.lines().position(|l| l.contains("nisa.tensor_scalar(")).expect("emitted") + 1;
    assert_eq!(
        run.stderr.lines().collect::<Vec<_>>(),
        [format!(
            "warning: undefined behaviour: nisa.tensor_scalar (unwritten.py:{np_line}) {text}; on hardware they hold whatever \
             the memory held, here they read as zero bits"
        )]
    );
    let run = common::spec_run(&pkg, "padded_tile", &args(true), 1, "fp32", "trn2");
    assert!(run.ok && run.stderr.is_empty(), "{}", run.stderr);
    assert_eq!(common::as_f32(run.outputs("padded_tile", 1))[0][0], expected(&x, p, f, 1.0));
}

/// Set in the child run of [`nki_strict_uninit_makes_the_read_an_error_in_both_executors`].
const CHILD: &str = "NKI_TEST_UNWRITTEN_CHILD";

#[test]
fn nki_strict_uninit_makes_the_read_an_error_in_both_executors() {
    let (p, f) = (4usize, 2usize);
    let x: Vec<f64> = (0..p * f).map(|i| i as f64).collect();
    let xt = common::tensor(&[p, f], &x, Dtype::F32);
    let strict_env = nki::emulator::STRICT_UNINIT_ENV;
    if std::env::var_os(CHILD).is_some() {
        // The child of this test binary, whose environment sets the variable:
        // a launch left to its default mode is strict.
        let e = padded_tile::Call::new(&xt, false).launch(&Launch::new()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Undefined, "{e}");
        assert!(e.to_string().contains(&format!("({strict_env}=1 makes this an error)")), "{e}");
        return;
    }
    // The process's environment is shared by every test thread: the variable is
    // set only in a child process that runs this test alone.
    let me = std::env::current_exe().expect("the test binary");
    // The test's name as the harness lists it: the module path without the crate.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::nki_strict_uninit_makes_the_read_an_error_in_both_executors");
    let child = std::process::Command::new(me)
        .args(["--exact", &name, "--test-threads=1"])
        .env(strict_env, "1")
        .env(CHILD, "1")
        .output()
        .expect("running the test binary");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success() && stdout.contains("1 passed"), "{stdout}{}", String::from_utf8_lossy(&child.stderr));

    let pkg = common::package_of("unwritten_pkg", &[&padded_tile::INFO]);
    let args = vec![(vec![common::Arg::Tensor(vec![p, f], x.clone(), Dtype::F32), common::Arg::Bool(false)], Vec::new())];
    let run = common::with_strict_uninit(true, || common::spec_run(&pkg, "padded_tile", &args, 1, "fp32", "trn2"));
    assert!(!run.ok, "{}", run.stderr);
    assert!(run.stderr.starts_with("error: nisa.tensor_scalar (unwritten.py:"), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("({strict_env}=1 makes this an error)")), "{}", run.stderr);
}
