//! Every instruction a profiled launch runs is in its profile, on the engine the
//! spec names: the examples built on the statistics, top-8 and scan instructions
//! profile with those instructions on the Vector Engine, and their results are the
//! same as an unprofiled run's.

use crate::common::{tensor, uniform};
use nki::profile::{Profile, Target, Unit};
use nki::{Dtype, Launch, Tensor};
use nki_examples::{dropout::dropout, embedding::embedding, layernorm::layernorm, topk::topk};
use nkilib::cumsum::cumsum::cumsum;

/// The (op, unit) pairs of a profile's slices.
fn ops(p: &Profile) -> Vec<(&'static str, Unit)> {
    p.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect()
}

/// Runs `kernel` plain and profiled on trn2; asserts equal results and returns the profile.
fn profiled(kernel: impl Fn(&Launch) -> nki::Result<Vec<Tensor>>) -> Profile {
    let plain = kernel(&Launch::new()).unwrap();
    let launch = Launch::new().profile(Target::Trn2);
    let out = kernel(&launch).unwrap();
    for (a, b) in plain.iter().zip(&out) {
        assert_eq!(
            a.to_f32_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            b.to_f32_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    launch.profiled().unwrap()
}

fn assert_has(p: &Profile, op: &str, unit: Unit) {
    let got = ops(p);
    assert!(got.iter().any(|&(o, u)| o == op && u == unit), "{op} on {unit:?} missing from the profile: {got:?}");
}

#[test]
fn statistics_top8_and_scan_instructions_are_profiled_on_the_vector_engine() {
    let x = tensor(&[128, 64], &uniform(128 * 64, 1, -1.0, 1.0), Dtype::F32);
    let (g, b) = (tensor(&[1, 64], &uniform(64, 2, 0.5, 1.5), Dtype::F32), tensor(&[1, 64], &uniform(64, 3, -0.5, 0.5), Dtype::F32));
    let p = profiled(|l| Ok(vec![layernorm::Call::new(&x, &g, &b).launch(l)?]));
    assert_has(&p, "nisa.bn_stats", Unit::Vector);
    assert_has(&p, "nisa.bn_aggr", Unit::Vector);

    let p = profiled(|l| {
        let (v, i) = topk::Call::new(&x, 16).launch(l)?;
        Ok(vec![v, i])
    });
    for op in ["nisa.max8", "nisa.nc_find_index8", "nisa.nc_match_replace8"] {
        assert_has(&p, op, Unit::Vector);
    }

    let p = profiled(|l| Ok(vec![cumsum::Call::new(&x).launch(l)?]));
    assert_has(&p, "nisa.tensor_tensor_scan", Unit::Vector);
    assert!(p.report.estimated_seconds > 0.0);
}

#[test]
fn an_indirect_dma_gather_is_profiled_on_the_dma_queues() {
    let table = tensor(&[300, 32], &uniform(300 * 32, 4, -1.0, 1.0), Dtype::F32);
    let ids = Tensor::from_i64(&[128, 1], &(0..128).map(|i| (i * 7) % 300).collect::<Vec<i64>>(), Dtype::I32).unwrap();
    let p = profiled(|l| Ok(vec![embedding::Call::new(&table, &ids).launch(l)?]));
    assert_has(&p, "nisa.dma_copy", Unit::Dma);
    assert!(p.report.estimated_seconds > 0.0);
}

#[test]
fn seeded_dropout_is_profiled_on_the_vector_engine() {
    let x = tensor(&[256, 64], &uniform(256 * 64, 5, -1.0, 1.0), Dtype::F32);
    let seed = Tensor::from_i64(&[1, 1], &[5], Dtype::U32).unwrap();
    let p = profiled(|l| Ok(vec![dropout::Call::new(&x, &seed, 0.2).launch(l)?]));
    assert_has(&p, "nisa.set_rng_seed", Unit::Vector);
    assert_has(&p, "nisa.dropout", Unit::Vector);
    assert!(p.report.estimated_seconds > 0.0);
}
