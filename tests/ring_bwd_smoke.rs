mod common;

use common::{assert_close, tensor, uniform};
use nki::attention::ring_bwd::ring_attention_bwd::ring_attention_spmd_bwd;
use nki::{Dtype, Launch, Precision};

struct G {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    o: Vec<f64>,
    lse: Vec<f64>,
}

fn grads(bh: usize, st: usize, d: usize, q: &[f64], k: &[f64], v: &[f64], dy: &[f64], scale: f64, causal: bool) -> G {
    let mut g =
        G { dq: vec![0.0; q.len()], dk: vec![0.0; q.len()], dv: vec![0.0; q.len()], o: vec![0.0; q.len()], lse: vec![0.0; bh * st] };
    for b in 0..bh {
        let at = |x: &[f64], i: usize, c: usize| x[(b * st + i) * d + c];
        for i in 0..st {
            let mut s = vec![f64::NEG_INFINITY; st];
            for j in 0..st {
                if !causal || j <= i {
                    s[j] = scale * (0..d).map(|c| at(q, i, c) * at(k, j, c)).sum::<f64>();
                }
            }
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = p.iter().sum();
            let p: Vec<f64> = p.iter().map(|x| x / z).collect();
            g.lse[b * st + i] = m + z.ln();
            for c in 0..d {
                g.o[(b * st + i) * d + c] = (0..st).map(|j| p[j] * at(v, j, c)).sum();
            }
            let dp: Vec<f64> = (0..st).map(|j| (0..d).map(|c| at(dy, i, c) * at(v, j, c)).sum()).collect();
            let dd: f64 = (0..st).map(|j| p[j] * dp[j]).sum();
            for j in 0..st {
                let ds = p[j] * (dp[j] - dd);
                for c in 0..d {
                    g.dq[(b * st + i) * d + c] += scale * ds * at(k, j, c);
                    g.dk[(b * st + j) * d + c] += scale * ds * at(q, i, c);
                    g.dv[(b * st + j) * d + c] += p[j] * at(dy, i, c);
                }
            }
        }
    }
    g
}

fn run(w: usize, causal: bool, striped: bool, lnc: usize, bh: usize, sl: usize, d: usize) {
    let st = w * sl;
    let n = bh * st * d;
    let (q, k, v, dy) = (uniform(n, 11, -1.0, 1.0), uniform(n, 12, -1.0, 1.0), uniform(n, 13, -1.0, 1.0), uniform(n, 14, -1.0, 1.0));
    let scale = 1.0 / (d as f64).sqrt();
    let g = grads(bh, st, d, &q, &k, &v, &dy, scale, causal);
    let pos = |r: usize, i: usize| if striped { i * w + r } else { r * sl + i };
    // [bh, st, d] -> rank r's [1, bh, d, sl]
    let dmaj = |x: &[f64], r: usize| {
        let mut out = vec![0.0; bh * d * sl];
        for b in 0..bh {
            for i in 0..sl {
                for c in 0..d {
                    out[(b * d + c) * sl + i] = x[(b * st + pos(r, i)) * d + c];
                }
            }
        }
        out
    };
    let lse_l = |r: usize| {
        let g_n = sl / 128;
        let mut out = vec![0.0; bh * 128 * g_n];
        for b in 0..bh {
            for i in 0..sl {
                out[(b * 128 + i % 128) * g_n + i / 128] = g.lse[b * st + pos(r, i)];
            }
        }
        out
    };
    let t = |x: Vec<f64>| tensor(&[1, bh, d, sl], &x, Dtype::F32);
    let ins: Vec<_> = (0..w)
        .map(|r| {
            (
                t(dmaj(&q, r)),
                t(dmaj(&k, r)),
                t(dmaj(&v, r)),
                t(dmaj(&g.o, r)),
                t(dmaj(&dy, r)),
                tensor(&[1, bh, 128, sl / 128], &lse_l(r), Dtype::F32),
            )
        })
        .collect();
    let outs = Launch::new()
        .ranks(w)
        .lnc(lnc)
        .precision(Precision::Fp32)
        .run_ranks(|ctx| {
            let x = &ins[ctx.rank()];
            ring_attention_spmd_bwd::Call::new(&x.0, &x.1, &x.2, &x.3, &x.4, &x.5)
                .use_causal_mask(causal)
                .striped_attention(striped)
                .num_workers(w as i64)
                .lnc_size(lnc as i64)
                .run(ctx)
        })
        .unwrap();
    for (r, (dq, dk, dv)) in outs.iter().enumerate() {
        assert_close(&format!("dq r{r}"), &dq.to_f32_vec(), &dmaj(&g.dq, r), 1e-6, 1e-4);
        assert_close(&format!("dk r{r}"), &dk.to_f32_vec(), &dmaj(&g.dk, r), 1e-6, 1e-4);
        assert_close(&format!("dv r{r}"), &dv.to_f32_vec(), &dmaj(&g.dv, r), 1e-6, 1e-4);
    }
}

#[test]
fn smoke() {
    run(1, false, false, 1, 1, 128, 32);
    run(2, false, false, 1, 2, 256, 32);
    run(2, true, false, 1, 2, 256, 32);
    run(4, true, true, 1, 1, 256, 32);
    run(3, true, false, 2, 3, 128, 32);
}
