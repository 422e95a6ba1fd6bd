//! Tensor indirection in a kernel (trn3): `t.indirect(index, num_elem)` as the
//! source of a compute-engine copy (a gather) and as its destination (a
//! scatter), in the emulator and under the NumPy executor, against index
//! arithmetic on the inputs.

use crate::common;

use crate::common::{Arg, assert_close, tensor};
use nki::hw::Generation;
use nki::prelude::*;

/// `x` `[16, 8]`, `idx` `[16, 2]` int32 offsets: `g` `[16, 20]` gathers column
/// `idx[i % 16, i // 16]` of `x` into column i; `u` is zeros with the first four
/// gathered columns scattered back to their offsets.
#[nki_kernel(target = "trn3")]
pub fn tensor_indirection(x: Hbm, #[dtypes(int32)] idx: Hbm) -> (Hbm, Hbm) {
    let [p, f] = x.shape();
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x);
    let ix = nl::ndarray([p, 2], nl::int32);
    nisa::dma_copy(ix, idx);
    let g = nl::ndarray([p, 20], nl::float32);
    nisa::tensor_copy(g, t.indirect(ix, num_elem = 20));
    let u = nl::ndarray([p, f], nl::float32);
    nisa::memset(u, 0.0);
    nisa::tensor_copy(u.indirect(ix, num_elem = 4), g[s![.., 0..4]]);
    let go = nl::ndarray([p, 20], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(go, g);
    let uo = nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(uo, u);
    (go, uo)
}

#[test]
fn indirect_views_gather_and_scatter_the_snake_offsets() {
    let (p, f) = (16usize, 8usize);
    let x: Vec<f64> = (0..p * f).map(|k| k as f64 * 0.25 - 7.0).collect();
    let off: Vec<f64> = (0..2 * p).map(|k| ((k * 5 + 3) % f) as f64).collect();
    let col = |i: usize| off[(i % 16) * 2 + i / 16] as usize;
    let want_g: Vec<f64> = (0..p).flat_map(|r| (0..20).map(move |i| (r, i))).map(|(r, i)| x[r * f + col(i)]).collect();
    let mut want_u = vec![0.0; p * f];
    for r in 0..p {
        for i in 0..4 {
            want_u[r * f + col(i)] = x[r * f + col(i)];
        }
    }
    let launch = Launch::new().generation(Generation::Trn3);
    let (g, u) =
        tensor_indirection::Call::new(&tensor(&[p, f], &x, Dtype::F32), &tensor(&[p, 2], &off, Dtype::I32)).launch(&launch).unwrap();
    assert_close("gather", &g.to_f32_vec(), &want_g, 0.0, 0.0);
    assert_close("scatter", &u.to_f32_vec(), &want_u, 0.0, 0.0);
    let src = tensor_indirection::NKI_SOURCE;
    assert!(src.contains("t.indirect(index=ix, num_elem=20)"), "{src}");
    let pkg = common::package_of("tensor_indirection_pkg", &[&tensor_indirection::INFO]);
    let args = vec![vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::F32), Arg::Tensor(vec![p, 2], off.clone(), Dtype::I32)]];
    let np = common::try_run_numpy_on(&pkg, "tensor_indirection", &args, 1, "hardware", "trn3")
        .map(common::as_f32)
        .unwrap_or_else(|e| panic!("{e}"))
        .swap_remove(0);
    assert_close("numpy gather", &np[0], &want_g, 0.0, 0.0);
    assert_close("numpy scatter", &np[1], &want_u, 0.0, 0.0);
}
