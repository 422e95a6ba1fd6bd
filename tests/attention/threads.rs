//! Helper threads change how fast a launch runs, never its results: the same
//! kernels on one thread and with helpers splitting their matmuls give the same
//! bits.

use crate::common;

use nki::attention::cte::{CteConfig, CteInputs};
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{SeqLayout, shard};
use nki::{Dtype, Launch, Precision, Tensor};

fn tensor(shape: &[usize], seed: u64, dtype: Dtype) -> Tensor {
    let n = shape.iter().product();
    common::tensor(shape, &common::uniform(n, seed, -1.0, 1.0), dtype)
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_f32_vec().into_iter().map(f32::to_bits).collect()
}

/// `launch` with one thread, and with `threads` (which must give its programs helpers).
fn one_and_many(launch: &Launch, threads: usize) -> (Launch, Launch) {
    let many = launch.clone().threads(threads);
    assert!(many.helpers_per_program() > 0, "{threads} threads give no helpers");
    (launch.clone().threads(1), many)
}

#[test]
fn attention_cte_is_bit_identical_with_helpers() {
    let (bs, s, d) = (2, 1024, 128);
    for (dtype, precision) in [(Dtype::F32, Precision::Fp32), (Dtype::Bf16, Precision::Hardware)] {
        let (q, k, v) = (tensor(&[bs, s, d], 1, dtype), tensor(&[bs, d, s], 2, dtype), tensor(&[bs, s, d], 3, dtype));
        for (lnc, causal) in [(1, true), (1, false), (2, true)] {
            let cfg = CteConfig::new().scale(0.088).causal_mask(causal);
            let (one, many) = one_and_many(&Launch::new().lnc(lnc).precision(precision), 4);
            let want = cfg.launch(&one, &CteInputs::new(&q, &k, &v)).unwrap().out;
            let got = cfg.launch(&many, &CteInputs::new(&q, &k, &v)).unwrap().out;
            let want_bits = bits(&want);
            assert!(want.to_f32_vec().iter().all(|x| x.is_finite()), "{precision} LNC{lnc}: non-finite output");
            assert!(bits(&got) == want_bits, "{precision} LNC{lnc} causal {causal}: helpers changed the result");
        }
    }
}

#[test]
fn ring_forward_is_bit_identical_with_helpers() {
    let (bh, st, d, w) = (2, 1024, 128, 2);
    let whole = |seed| tensor(&[1, bh, st, d], seed, Dtype::F32);
    let (q, k, v) = (whole(4), whole(5), whole(6));
    let (qs, ks, vs) = (
        shard(&q, w, SeqLayout::Striped, true).unwrap(),
        shard(&k, w, SeqLayout::Striped, true).unwrap(),
        shard(&v, w, SeqLayout::Striped, false).unwrap(),
    );
    let cfg = RingFwdConfig::new(w as i64).causal(true).striped(true).training(true);
    let scale = cfg.scale_for(d);
    let inputs = RingFwdInputs { q: Queries::Prescaled { q: &qs, scale }, k: &ks, v: &vs, sinks: None, segment_ids: None, bias: None };
    let (one, many) = one_and_many(&Launch::new().ranks(w).precision(Precision::Fp32), 8);
    let want = cfg.launch(&one, &inputs).unwrap();
    let got = cfg.launch(&many, &inputs).unwrap();
    for r in 0..w {
        assert!(bits(&got.out[r]) == bits(&want.out[r]), "rank {r} output");
        let (gl, wl) = (got.lse.as_ref().unwrap(), want.lse.as_ref().unwrap());
        assert!(bits(&gl[r]) == bits(&wl[r]), "rank {r} lse");
    }
}
