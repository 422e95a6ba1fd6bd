//! `alpha * x + y` written with `nki.language` tile functions.

use nki::prelude::*;

/// `alpha * x + y` over `[N, M]` tensors (`N` a multiple of 128), in fp32,
/// output in `x`'s dtype.
///
/// Per 128-row block: `nl.load` both inputs into SBUF tiles (`y` cast to fp32
/// on the way), one `nisa.scalar_tensor_tensor` computing `(x * alpha) + y`
/// with `alpha` as a per-partition column made by `nl.full`, and `nl.store`
/// of the result.
#[nki_kernel]
pub fn axpy(x: Hbm, y: Hbm, alpha: f64) -> Hbm {
    let [n, m] = x.shape();
    assert!(n % 128 == 0, "rows must be a multiple of 128, got {n}");
    let out = nl::ndarray([n, m], x.dtype(), buffer = nl::shared_hbm);
    let a = nl::full([128, 1], alpha, nl::float32);
    for i in 0..n / 128 {
        let xt = nl::load(x[s![i * 128..(i + 1) * 128, ..]]);
        let yt = nl::load(y[s![i * 128..(i + 1) * 128, ..]], dtype = nl::float32);
        let r = nl::ndarray([128, m], x.dtype());
        nisa::scalar_tensor_tensor(r, xt, nl::multiply, a, nl::add, yt);
        nl::store(out[s![i * 128..(i + 1) * 128, ..]], r);
    }
    out
}
