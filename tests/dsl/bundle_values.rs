//! `#[nki_object]` bundles as values: chosen by an `if` used as a value (Python's
//! `a if cond else b`, `else if` chains included, a branch may be a helper's
//! result) and returned by a helper call passed straight to another helper (a call
//! inside a call), in the emulator and, from the emitted NKI, under NumPy.

use crate::common::{self, Arg};

use nki::prelude::*;

#[nki_module]
pub mod bundled {
    use nki::prelude::*;

    /// A scale and an offset: `t * scale + offset`.
    #[nki_object]
    pub struct Affine {
        /// Multiplies.
        pub scale: f64,
        /// Added after scaling.
        pub offset: f64,
    }

    /// `Affine { scale, offset: 1.0 }`.
    #[nki_helper]
    pub fn unit_offset(scale: f64) -> Affine {
        Affine { scale, offset: 1.0 }
    }

    /// `cfg` with its scale multiplied by `k`.
    #[nki_helper]
    pub fn rescaled(cfg: Affine, k: f64) -> Affine {
        Affine { scale: cfg.scale * k, offset: cfg.offset }
    }

    /// `t = t * cfg.scale + cfg.offset`.
    #[nki_helper]
    pub fn apply(t: Sbuf, cfg: Affine) {
        nisa::tensor_scalar(t, t, nl::multiply, cfg.scale, op1 = nl::add, operand1 = cfg.offset);
    }

    /// `x` through three affine maps: one an `if` picks by `mode` (0, 1, else), one
    /// a helper returns straight into `apply`, one a helper makes from another
    /// helper's result; then `+ first.offset` of the map the `if` picked.
    #[nki_kernel]
    pub fn affine_chain(x: Hbm, mode: i64) -> Hbm {
        let [p, f] = x.shape();
        let t = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(t, x);
        let first = if mode == 0 {
            Affine { scale: 2.0, offset: 0.5 }
        } else if mode == 1 {
            unit_offset(-3.0)
        } else {
            Affine { scale: 0.25, offset: -1.0 }
        };
        apply(t, first);
        apply(t, unit_offset(4.0));
        apply(t, rescaled(unit_offset(0.5), 3.0));
        nisa::tensor_scalar(t, t, nl::add, first.offset);
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, t);
        out
    }
}

#[test]
fn bundles_from_an_if_and_from_a_call_in_a_call_agree_with_numpy() {
    let xs: Vec<f64> = (0..4 * 8).map(|i| f64::from(i % 9) - 4.0).collect();
    let x = common::tensor(&[4, 8], &xs, Dtype::F32);
    let pkg = common::package_of(
        "bundle_values_pkg",
        &[&bundled::affine_chain::INFO, &bundled::apply::INFO, &bundled::unit_offset::INFO, &bundled::rescaled::INFO],
    );
    // (scale, offset) of the map each mode picks.
    for (mode, (a, b)) in [(0, (2.0, 0.5)), (1, (-3.0, 1.0)), (2, (0.25, -1.0))] {
        // x*a + b, then *4 + 1, then *1.5 + 1, then + b.
        let want: Vec<f64> = xs.iter().map(|v| ((v * a + b) * 4.0 + 1.0) * 1.5 + 1.0 + b).collect();
        let got = bundled::affine_chain::Call::new(&x, mode).launch(&Launch::new()).unwrap().to_f32_vec();
        common::assert_close(&format!("emulator, mode {mode}"), &got, &want, 1e-5, 1e-6);
        let args = vec![vec![Arg::Tensor(vec![4, 8], xs.clone(), Dtype::F32), Arg::Int(mode)]];
        let np = common::run_numpy_ranks(&pkg, "affine_chain", &args, 1, "fp32").swap_remove(0);
        common::assert_close(&format!("numpy, mode {mode}"), &np[0], &want, 1e-5, 1e-6);
    }
    let src = bundled::affine_chain::NKI_SOURCE;
    for line in [
        "first = Affine(scale=2.0, offset=0.5) if mode == 0 else unit_offset(-3.0) if mode == 1 else Affine(scale=0.25, offset=-1.0)",
        "apply(t, unit_offset(4.0))",
        "apply(t, rescaled(unit_offset(0.5), 3.0))",
    ] {
        assert!(src.contains(line), "{line:?} not in\n{src}");
    }
}
