mod common;

use common::attention::{Problem, transpose_last2};
use common::{assert_close, tensor, uniform};
use nki::attention::ring_fwd::ring_attention_fwd::ring_attention_spmd_fwd;
use nki::{Dtype, Launch, Precision};

fn run(w: usize, causal: bool, striped: bool, lnc: usize, bh: usize, sl: usize, d: usize) {
    let st = w * sl;
    let q = uniform(bh * st * d, 1, -1.0, 1.0);
    let k = uniform(bh * st * d, 2, -1.0, 1.0);
    let v = uniform(bh * st * d, 3, -1.0, 1.0);
    let scale = 1.0 / (d as f64).sqrt();
    // global position of local row i on rank r
    let pos = |r: usize, i: usize| if striped { i * w + r } else { r * sl + i };
    let local = |x: &[f64], r: usize| -> Vec<f64> {
        let mut out = vec![0.0; bh * sl * d];
        for b in 0..bh {
            for i in 0..sl {
                let g = pos(r, i);
                out[(b * sl + i) * d..(b * sl + i + 1) * d].copy_from_slice(&x[(b * st + g) * d..(b * st + g + 1) * d]);
            }
        }
        out
    };
    let mut qs = Vec::new();
    let mut ks = Vec::new();
    let mut vs = Vec::new();
    for r in 0..w {
        let mut ql = local(&q, r);
        if causal {
            ql.iter_mut().for_each(|x| *x *= scale);
        }
        qs.push(tensor(&[1, bh, d, sl], &transpose_last2(&ql, bh, sl, d), Dtype::F32));
        ks.push(tensor(&[1, bh, d, sl], &transpose_last2(&local(&k, r), bh, sl, d), Dtype::F32));
        vs.push(tensor(&[1, bh, sl, d], &local(&v, r), Dtype::F32));
    }
    let outs = Launch::new()
        .ranks(w)
        .lnc(lnc)
        .precision(Precision::Fp32)
        .run_ranks(|ctx| {
            let r = ctx.rank();
            ring_attention_spmd_fwd::Call::new(&qs[r], &ks[r], &vs[r])
                .num_workers(w as i64)
                .use_causal_mask(causal)
                .striped_input(striped)
                .training(true)
                .run(ctx)
        })
        .unwrap();
    let want = Problem { scale, causal, ..Problem::new(bh, bh, st, st, d, &q, &k, &v) }.solve(true);
    for (r, o) in outs.iter().enumerate() {
        let got = o.get(0).unwrap().to_f32_vec();
        let exp = local(&want.out, r);
        assert_close(&format!("rank {r} out"), &got, &exp, 1e-6, 1e-5);
    }
}

#[test]
fn smoke() {
    run(2, false, false, 1, 2, 256, 64);
    run(3, true, false, 1, 2, 256, 64);
    run(4, true, true, 2, 3, 256, 64);
}
