//! Races on shared HBM between the two programs of an LNC2 launch: both write
//! one element with no barrier between, which leaves a value that depends on
//! timing; both executors stop with an error naming the element and the
//! programs, and a barrier between the writes orders them.

use crate::common;

use crate::common::{Arg, assert_close, tensor};
use nki::ErrorKind;
use nki::prelude::*;

/// `x` `[2, P, F]`: program 0 stores `x[0]` into the shared `[P, F]` output,
/// then program 1 stores `x[1]` there, with a barrier between the turns when
/// `barrier` (else the two stores race).
#[nki_kernel]
pub fn turns(x: Hbm, barrier: bool) -> Hbm {
    let [_two, p, f] = x.shape();
    let me = nl::program_id(0);
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x[s![me, .., ..]]);
    let out = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    if me == 0 {
        nisa::dma_copy(out, t);
    }
    if barrier {
        nisa::core_barrier(out, [0, 1]);
    }
    if me == 1 {
        nisa::dma_copy(out, t);
    }
    out
}

#[test]
fn two_programs_writing_one_element_race_unless_a_barrier_orders_them() {
    let (p, f) = (2usize, 4usize);
    let x: Vec<f64> = (0..2 * p * f).map(|i| i as f64 + 0.5).collect();
    let pkg = common::package_of("write_races_pkg", &[&turns::INFO]);
    let args = |barrier| vec![vec![Arg::Tensor(vec![2, p, f], x.clone(), Dtype::F32), Arg::Bool(barrier)]];
    let launch = |barrier| turns::Call::new(&tensor(&[2, p, f], &x, Dtype::F32), barrier).launch(&Launch::new().lnc(2));

    let out = launch(true).unwrap();
    assert_close("emulated", &out.to_f32_vec(), &x[p * f..], 0.0, 0.0);
    let np = common::run_numpy_ranks(&pkg, "turns", &args(true), 2, "fp32").swap_remove(0);
    assert_close("numpy", &np[0], &x[p * f..], 0.0, 0.0);

    let race = "[2, 4] float32 in shared HBM is written by program";
    let e = launch(false).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Race, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("element [0, 0] of 'out'") && text.contains(race) && text.contains("without a synchronisation between"),
        "{text}"
    );
    assert!(text.contains("nisa.dma_copy") && text.contains("tests/dsl/write_races.rs"), "{text}");
    let np = common::try_run_numpy_ranks(&pkg, "turns", &args(false), 2, "fp32").unwrap_err();
    assert!(np.contains("element [0, 0] of '") && np.contains(race), "{np}");
}
