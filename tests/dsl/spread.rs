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

    /// `x + y (+ bias)`, negated: a signature that puts `negate` inside the
    /// bundle's fields spreads them in two runs.
    #[nki_kernel]
    pub fn split_add(#[spread(to = x)] _: AddInputs, negate: bool, #[spread(from = y)] _: AddInputs) -> Hbm {
        let [p, f] = x.shape();
        let (a, b) = (nl::ndarray([p, f], nl::float32), nl::ndarray([p, f], nl::float32));
        nisa::dma_copy(a, x);
        nisa::dma_copy(b, y);
        nisa::tensor_tensor(a, a, b, nl::add);
        if let Some(extra) = bias {
            nisa::dma_copy(b, extra);
            nisa::tensor_tensor(a, a, b, nl::add);
        }
        if negate {
            nisa::tensor_scalar(a, a, nl::multiply, -1.0);
        }
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, a);
        out
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
        let [p, f] = x.shape();
        let a = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(a, x);
        nisa::tensor_scalar(a, a, nl::multiply, inner.factor, op1 = nl::add, operand1 = inner.shift);
        nisa::tensor_scalar(a, a, nl::multiply, outer_factor, op1 = nl::add, operand1 = outer.shift);
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, a);
        out
    }
}

use grouped::{scaled_add, split_add, two_affine};

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
    let names: Vec<&str> = split_add::INFO.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["x", "negate", "y", "bias"]);
    assert!(split_add::NKI_SOURCE.contains("def split_add(x, negate, y, bias=None):"), "{}", split_add::NKI_SOURCE);
    assert!(!split_add::NKI_SOURCE.contains("AddInputs("), "a part builds no bundle");
    let xs = [1.0, -2.0, 3.5, 0.25];
    let ys = [0.5, 0.5, -1.0, 2.0];
    let bs = [0.0, 1.0, 2.0, 3.0];
    let (x, y, bias) =
        (common::tensor(&[2, 2], &xs, Dtype::F32), common::tensor(&[2, 2], &ys, Dtype::F32), common::tensor(&[2, 2], &bs, Dtype::F32));
    let want: Vec<f64> = (0..4).map(|i| -(xs[i] + ys[i] + bs[i])).collect();
    let got = split_add::Call::new(&x, true, &y).bias(&bias).launch(&Launch::new()).unwrap().to_f32_vec();
    common::assert_close("emulator", &got, &want, 0.0, 0.0);
}
