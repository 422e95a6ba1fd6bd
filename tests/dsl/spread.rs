//! Parameter groups: `#[spread] name: Bundle` declares a bundle's fields as
//! parameters of their own (the library's long drop-in signatures share runs of
//! them). The Rust `Call`, the registry and the Python `def` take the fields;
//! the body reads the bundle, or the fields by name.

use crate::common::{self, Arg};

use nki::prelude::*;

#[nki_module]
pub mod grouped {
    use nki::prelude::*;

    /// The tensors a scaled add takes.
    #[nki_object]
    pub struct AddInputs {
        /// Rows `[P, F]`.
        #[dtypes(float32, bfloat16)]
        pub x: Hbm,
        /// Added, like `x`.
        #[dtypes(float32, bfloat16)]
        pub y: Hbm,
        /// Added after `y` when given.
        #[dtypes(float32)]
        #[default(None)]
        pub bias: Option<Hbm>,
    }

    /// How `y` is scaled.
    #[nki_object]
    pub struct Scaling {
        /// Multiplies `y`.
        #[default(2.0)]
        pub factor: f64,
        /// Adds to the result.
        #[default(0.0)]
        pub shift: f64,
    }

    /// `x + factor·y (+ bias) + shift`: the inputs read through their bundle,
    /// the scaling by its fields' names.
    #[nki_kernel]
    pub fn scaled_add(#[spread] inp: AddInputs, #[default(false)] negate: bool, #[spread] _: Scaling) -> Hbm {
        let [p, f] = inp.x.shape();
        let (a, b) = (nl::ndarray([p, f], nl::float32), nl::ndarray([p, f], nl::float32));
        nisa::dma_copy(a, inp.x);
        nisa::dma_copy(b, y);
        nisa::tensor_scalar(b, b, nl::multiply, factor);
        nisa::tensor_tensor(a, a, b, nl::add);
        if let Some(extra) = inp.bias {
            nisa::dma_copy(b, extra);
            nisa::tensor_tensor(a, a, b, nl::add);
        }
        nisa::tensor_scalar(a, a, nl::add, shift);
        if negate {
            nisa::tensor_scalar(a, a, nl::multiply, -1.0);
        }
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, a);
        out
    }

    /// The window a clip keeps: a parameter group, no bundle.
    #[nki_params]
    pub struct Window {
        /// The floor.
        #[default(-1.0)]
        pub lo: f64,
        /// The ceiling.
        #[default(1.0)]
        pub hi: f64,
    }

    /// `x` clipped to `[lo, hi]`.
    #[nki_kernel]
    pub fn clipped(x: Hbm, #[spread] _: Window) -> Hbm {
        let [p, f] = x.shape();
        let a = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(a, x);
        nisa::tensor_scalar(a, a, nl::maximum, lo, op1 = nl::minimum, operand1 = hi);
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, a);
        out
    }

    /// `factor·x + shift` (rows `[P, F]`).
    #[nki_helper]
    pub fn affine(x: Hbm, factor: f64, shift: f64) -> Hbm {
        let [p, f] = x.shape();
        let a = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(a, x);
        nisa::tensor_scalar(a, a, nl::multiply, factor, op1 = nl::add, operand1 = shift);
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, a);
        out
    }

    /// `±factor·x + shift`, with `negate` between the bundle's two fields: a
    /// signature that interrupts a bundle spreads it in two runs.
    #[nki_kernel]
    pub fn split_affine(
        x: Hbm,
        #[spread(to = factor)] _: Scaling,
        #[default(false)] negate: bool,
        #[spread(from = shift)] _: Scaling,
    ) -> Hbm {
        let scale = if negate { -factor } else { factor };
        affine(x, scale, shift)
    }

    /// `outer(inner(x))`, each an affine map `factor·v + shift`: one bundle
    /// read twice, its parameters named apart by a prefix, the outer shift
    /// renamed outright.
    #[nki_kernel]
    pub fn two_affine(
        x: Hbm,
        #[spread(prefix = "inner_")] inner: Scaling,
        #[spread(prefix = "outer_", shift = outer_offset)] outer: Scaling,
    ) -> Hbm {
        assert!(outer.factor != 0.0, "two_affine: outer_factor must not be 0");
        let inside = affine(x, inner.factor, inner.shift);
        affine(inside, outer.factor, outer.shift)
    }
}

use grouped::{clipped, scaled_add, split_affine, two_affine};

#[test]
fn the_fields_are_the_parameters_in_rust_the_registry_and_python() {
    let names: Vec<&str> = scaled_add::INFO.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["x", "y", "bias", "negate", "factor", "shift"]);
    let y = scaled_add::INFO.params.iter().find(|p| p.name == "y").unwrap();
    assert_eq!((y.optional, y.bundle), (false, None));
    let src = scaled_add::NKI_SOURCE;
    for line in [
        "def scaled_add(x, y, bias=None, negate=False, factor=2.0, shift=0.0):",
        "inp = AddInputs(x=x, y=y, bias=bias)",
        "nisa.tensor_scalar(dst=b, data=b, op0=nl.multiply, operand0=factor)",
    ] {
        assert!(src.contains(line), "{line:?} not in\n{src}");
    }
    // The fields' dtypes are the parameters' contract.
    let e = scaled_add::Call::new(&common::tensor(&[2, 4], &[0.0; 8], Dtype::I32), &common::tensor(&[2, 4], &[0.0; 8], Dtype::F32))
        .launch(&Launch::new())
        .unwrap_err();
    assert!(e.message.contains("invalid x = int32: scaled_add takes x as float32 or bfloat16"), "{e}");
}

#[test]
fn a_spread_kernel_agrees_with_float64_and_numpy() {
    let (p, f) = (4usize, 8usize);
    let xs: Vec<f64> = (0..p * f).map(|i| f64::from(i as u32 % 7) - 3.0).collect();
    let ys: Vec<f64> = (0..p * f).map(|i| f64::from(i as u32 % 5) * 0.5).collect();
    let bs: Vec<f64> = (0..p * f).map(|i| f64::from(i as u32 % 3) - 1.0).collect();
    let (x, y, bias) =
        (common::tensor(&[p, f], &xs, Dtype::F32), common::tensor(&[p, f], &ys, Dtype::F32), common::tensor(&[p, f], &bs, Dtype::F32));
    let pkg = common::package_of("spread_pkg", &[&scaled_add::INFO]);
    let tensor = |v: &[f64]| Arg::Tensor(vec![p, f], v.to_vec(), Dtype::F32);
    // Defaults: factor 2, shift 0, no bias.
    let want: Vec<f64> = xs.iter().zip(&ys).map(|(a, b)| a + 2.0 * b).collect();
    let got = scaled_add::Call::new(&x, &y).launch(&Launch::new()).unwrap().to_f32_vec();
    common::assert_close("emulator, defaults", &got, &want, 0.0, 0.0);
    let np = common::run_numpy_ranks(&pkg, "scaled_add", &[vec![tensor(&xs), tensor(&ys)]], 1, "fp32").swap_remove(0);
    common::assert_close("numpy, defaults", &np[0], &want, 0.0, 0.0);
    // Every field given: -(x + 0.5·y + bias + 1.5).
    let want: Vec<f64> = (0..p * f).map(|i| -(xs[i] + 0.5 * ys[i] + bs[i] + 1.5)).collect();
    let call = scaled_add::Call::new(&x, &y).bias(&bias).negate(true).factor(0.5).shift(1.5);
    common::assert_close("emulator, all given", &call.launch(&Launch::new()).unwrap().to_f32_vec(), &want, 0.0, 0.0);
    let args = vec![tensor(&xs), tensor(&ys), tensor(&bs), Arg::Bool(true), Arg::Float(0.5), Arg::Float(1.5)];
    let np = common::run_numpy_ranks(&pkg, "scaled_add", &[args], 1, "fp32").swap_remove(0);
    common::assert_close("numpy, all given", &np[0], &want, 0.0, 0.0);
}

#[test]
fn a_prefix_and_a_rename_name_the_fields_parameters() {
    let names: Vec<&str> = two_affine::INFO.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["x", "inner_factor", "inner_shift", "outer_factor", "outer_offset"]);
    let src = two_affine::NKI_SOURCE;
    for line in [
        "def two_affine(x, inner_factor=2.0, inner_shift=0.0, outer_factor=2.0, outer_offset=0.0):",
        "inner = Scaling(factor=inner_factor, shift=inner_shift)",
        "outer = Scaling(factor=outer_factor, shift=outer_offset)",
    ] {
        assert!(src.contains(line), "{line:?} not in\n{src}");
    }
    // An assert on a group's field is the contract of the parameter it came from.
    let checks = |name: &str| two_affine::INFO.params.iter().find(|p| p.name == name).map(|p| p.checks.to_vec());
    assert_eq!(checks("outer_factor"), Some(vec!["two_affine: outer_factor must not be 0"]));
    assert_eq!(checks("inner_factor"), Some(vec![]));
    let (p, f) = (2usize, 4usize);
    let xs: Vec<f64> = (0..p * f).map(|i| f64::from(i as u32) - 3.0).collect();
    let x = common::tensor(&[p, f], &xs, Dtype::F32);
    // Defaults: 2·(2·x) = 4·x.
    let want: Vec<f64> = xs.iter().map(|v| 4.0 * v).collect();
    let got = two_affine::Call::new(&x).launch(&Launch::new()).unwrap().to_f32_vec();
    common::assert_close("emulator, defaults", &got, &want, 0.0, 0.0);
    // -0.5·(3·x + 1) + 0.25.
    let want: Vec<f64> = xs.iter().map(|v| -0.5 * (3.0 * v + 1.0) + 0.25).collect();
    let call = two_affine::Call::new(&x).inner_factor(3.0).inner_shift(1.0).outer_factor(-0.5).outer_offset(0.25);
    common::assert_close("emulator, all given", &call.launch(&Launch::new()).unwrap().to_f32_vec(), &want, 0.0, 0.0);
    let pkg = common::package_of("spread_named_pkg", &[&two_affine::INFO]);
    let args = vec![Arg::Tensor(vec![p, f], xs.clone(), Dtype::F32), Arg::Float(3.0), Arg::Float(1.0), Arg::Float(-0.5), Arg::Float(0.25)];
    let np = common::run_numpy_ranks(&pkg, "two_affine", &[args], 1, "fp32").swap_remove(0);
    common::assert_close("numpy, all given", &np[0], &want, 0.0, 0.0);
}

#[test]
fn a_bundle_spread_in_two_runs_keeps_the_signature_order() {
    let names: Vec<&str> = split_affine::INFO.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["x", "factor", "negate", "shift"]);
    let src = split_affine::NKI_SOURCE;
    assert!(src.contains("def split_affine(x, factor=2.0, negate=False, shift=0.0):"), "{src}");
    assert!(!src.contains("Scaling("), "a part builds no bundle:\n{src}");
    let xs = [1.0, -2.0, 3.5, 0.25];
    let x = common::tensor(&[2, 2], &xs, Dtype::F32);
    let want: Vec<f64> = xs.iter().map(|v| -1.5 * v + 0.5).collect();
    let got = split_affine::Call::new(&x).factor(1.5).negate(true).shift(0.5).launch(&Launch::new()).unwrap().to_f32_vec();
    common::assert_close("emulator", &got, &want, 0.0, 0.0);
}

#[test]
fn a_parameter_group_declares_parameters_and_no_class() {
    let names: Vec<&str> = clipped::INFO.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["x", "lo", "hi"]);
    let all: String = nki::emit::Package::new(&[&clipped::INFO]).unwrap().files().values().cloned().collect();
    assert!(all.contains("def clipped(x, lo=-1.0, hi=1.0):"), "{all}");
    assert!(!all.contains("Window"), "a group has no Python class:\n{all}");
    let xs = [-3.0, -0.5, 0.25, 2.0, 1.0, -1.0];
    let x = common::tensor(&[2, 3], &xs, Dtype::F32);
    for (lo, hi) in [(-1.0, 1.0), (-0.25, 0.5)] {
        let want: Vec<f64> = xs.iter().map(|v| v.max(lo).min(hi)).collect();
        let got = clipped::Call::new(&x).lo(lo).hi(hi).launch(&Launch::new()).unwrap().to_f32_vec();
        common::assert_close("emulator", &got, &want, 0.0, 0.0);
        let args = vec![Arg::Tensor(vec![2, 3], xs.to_vec(), Dtype::F32), Arg::Float(lo), Arg::Float(hi)];
        let pkg = common::package_of("spread_group_pkg", &[&clipped::INFO]);
        let np = common::run_numpy_ranks(&pkg, "clipped", &[args], 1, "fp32").swap_remove(0);
        common::assert_close("numpy", &np[0], &want, 0.0, 0.0);
    }
}
