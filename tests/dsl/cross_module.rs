//! A kernel of one `#[nki_module]` using the constants, enum, bundles (one
//! nested in another) and helper of another (`cross_module/shared.rs`), by
//! `use crate::..::{..}`: in the emulator and, from the emitted package, whose
//! module imports them from the other one, under NumPy.

pub mod shared;

use crate::common::{self, Arg};

use nki::prelude::*;

#[nki_module]
pub mod user {
    use crate::cross_module::shared::{Affine, ROWS_RULE, Sign, Step, TILE_ROWS, WORK_DTYPE, apply};
    use nki::prelude::*;

    /// Two steps: a bundle of this module holding bundles of the other.
    #[nki_object]
    pub struct Plan {
        /// Applied first.
        pub first: Step,
        /// Applied second.
        pub second: Step,
    }

    /// `x` `[rows, cols]` through `plan`'s two steps, a tile of TILE_ROWS rows at
    /// a time; the first step's sign is `sign`.
    #[nki_kernel]
    pub fn two_steps(x: Hbm, sign: Sign, scale: f64) -> Hbm {
        let [rows, cols] = x.shape();
        assert!(rows % TILE_ROWS == 0, ROWS_RULE);
        let plan = Plan {
            first: Step { map: Affine { scale, offset: 1.0 }, sign },
            second: Step { map: Affine { scale: 0.5, offset: -2.0 }, sign: Sign::Keep },
        };
        let out = nl::ndarray([rows, cols], x.dtype(), buffer = nl::shared_hbm);
        for i in 0..rows / TILE_ROWS {
            let r0 = i * TILE_ROWS;
            let t = nl::ndarray([TILE_ROWS, cols], WORK_DTYPE, buffer = nl::sbuf);
            nisa::dma_copy(t, x[s![r0..r0 + TILE_ROWS, ..]]);
            apply(t, plan.first);
            apply(t, plan.second);
            nisa::tensor_scalar(t, t, nl::add, plan.second.map.offset);
            nisa::dma_copy(out[s![r0..r0 + TILE_ROWS, ..]], t);
        }
        out
    }
}

#[test]
fn a_kernel_uses_another_modules_constants_bundles_enum_and_helper() {
    let xs: Vec<f64> = (0..4 * 3).map(|i| f64::from(i % 7) - 3.0).collect();
    let x = common::tensor(&[4, 3], &xs, Dtype::F32);
    let pkg = common::package_of("cross_module_pkg", &[&user::two_steps::INFO]);
    for (sign, member, flip) in [(shared::Sign::Keep, "Keep", 1.0), (shared::Sign::Flip, "Flip", -1.0)] {
        // ±(x·3 + 1) + 0.5, then (·0.5 - 2) + 0.5, then - 2.
        let want: Vec<f64> = xs.iter().map(|v| ((flip * (v * 3.0 + 1.0) + 0.5) * 0.5 - 2.0 + 0.5) - 2.0).collect();
        let got = user::two_steps::Call::new(&x, sign, 3.0).launch(&Launch::new()).unwrap().to_f32_vec();
        common::assert_close(&format!("emulator, {member}"), &got, &want, 1e-6, 1e-6);
        let args = vec![vec![Arg::Tensor(vec![4, 3], xs.clone(), Dtype::F32), Arg::Member("Sign", member), Arg::Float(3.0)]];
        let np = common::run_numpy_ranks(&pkg, "two_steps", &args, 1, "fp32").swap_remove(0);
        common::assert_close(&format!("numpy, {member}"), &np[0], &want, 1e-6, 1e-6);
    }
    // The emitted module imports what it uses from the other, which defines it once.
    let files = nki::emit::Package::new(&[&user::two_steps::INFO]).unwrap();
    let user_py = &files.files()["cross_module.py"];
    for import in [
        "from .shared import Affine\n",
        "from .shared import ROWS_RULE\n",
        "from .shared import TILE_ROWS\n",
        "from .shared import apply\n",
    ] {
        assert!(user_py.contains(import), "{import:?} not in\n{user_py}");
    }
    assert!(!user_py.contains("TILE_ROWS = 2") && !user_py.contains("class Step"), "{user_py}");
    let shared_py = &files.files()["shared.py"];
    assert!(shared_py.contains("\nTILE_ROWS = 2\n") && shared_py.contains("class Step(nl.NKIObject):"), "{shared_py}");
    // The rule's message is the constant's, from either module.
    let odd = common::tensor(&[3, 3], &xs[..9], Dtype::F32);
    let e = user::two_steps::Call::new(&odd, shared::Sign::Keep, 1.0).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains(shared::ROWS_RULE), "{e}");
}

/// A module using a bundle of another crate: `nkilib`'s `ClampLimits`, whose
/// module exports its items (`#[nki_module(export = blockwise_mm_backward)]`).
#[nki_module]
pub mod other_crate {
    use nki::prelude::*;
    use nkilib::experimental::moe::blockwise_mm_backward::ClampLimits;

    /// `x` `[rows, cols]` (at most 128 rows) capped at
    /// `limits.linear_clamp_upper_limit` when given.
    #[nki_kernel]
    pub fn capped(x: Hbm, limits: Option<ClampLimits>) -> Hbm {
        let [rows, cols] = x.shape();
        let out = nl::ndarray([rows, cols], x.dtype(), buffer = nl::shared_hbm);
        let t = nl::ndarray([rows, cols], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(t, x);
        if let Some(l) = limits {
            let upper = l.linear_clamp_upper_limit;
            if let Some(hi) = upper {
                nisa::tensor_scalar(t, t, nl::minimum, hi);
            }
        }
        nisa::dma_copy(out, t);
        out
    }
}

#[test]
fn a_kernel_uses_a_bundle_of_another_crate() {
    use nkilib::experimental::moe::blockwise_mm_backward::ClampLimits;
    let xs: Vec<f64> = (0..4 * 3).map(|i| f64::from(i) / 8.0 - 0.5).collect();
    let x = common::tensor(&[4, 3], &xs, Dtype::F32);
    let capped: Vec<f64> = xs.iter().map(|v| v.min(0.25)).collect();
    let limits = ClampLimits { linear_clamp_upper_limit: Some(0.25), ..ClampLimits::default() };
    let launch = Launch::new();
    let got = |call: other_crate::capped::Call| call.launch(&launch).unwrap().to_f32_vec();
    common::assert_close("emulator, None", &got(other_crate::capped::Call::new(&x)), &xs, 0.0, 0.0);
    common::assert_close("emulator, capped", &got(other_crate::capped::Call::new(&x).limits(limits)), &capped, 0.0, 0.0);
    // The emitted module imports the class from the other crate's module; the
    // fields left out take the dataclass's `None` defaults.
    let files = nki::emit::Package::new(&[&other_crate::capped::INFO]).unwrap();
    let user_py = &files.files()["cross_module.py"];
    assert!(user_py.contains("from .blockwise_mm_backward import ClampLimits\n"), "{user_py}");
    let pkg = common::package_of("cross_crate_pkg", &[&other_crate::capped::INFO]);
    let tensor = Arg::Tensor(vec![4, 3], xs.clone(), Dtype::F32);
    for (limits, want) in [(Arg::None, &xs), (Arg::Object("ClampLimits", vec![("linear_clamp_upper_limit", Arg::Float(0.25))]), &capped)] {
        let np = common::run_numpy_ranks(&pkg, "capped", &[vec![tensor.clone(), limits]], 1, "fp32").swap_remove(0);
        common::assert_close("numpy", &np[0], want, 0.0, 0.0);
    }
    // The registry lists the bundle's fields, the bundle absent unless one is given.
    let limit = other_crate::capped::INFO.params.iter().find(|p| p.name == "limits.linear_clamp_upper_limit").unwrap();
    assert_eq!((limit.bundle, limit.optional_bundles, limit.default), (Some("ClampLimits"), &["limits"][..], Some("None")));
}
