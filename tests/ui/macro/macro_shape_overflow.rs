use nki::prelude::*;

/// Shapes whose element counts or byte sizes leave the i64 range, and slices
/// whose bounds do, are errors at the user's tokens.
#[nki_kernel]
fn k(x: Hbm) {
    let wide = nl::ndarray([128, 9223372036854775807], nl::float32);
    let huge = nl::ndarray([128; 512], nl::float32, buffer = nl::shared_hbm);
    let tall = nl::ndarray([9223372036854775807, 9223372036854775807], nl::float32, buffer = nl::shared_hbm);
    let t = nl::ndarray([128, 512], nl::float32);
    nisa::dma_copy(t, x[s![nl::ds(9223372036854775807, 9223372036854775807), ..]]);
    nisa::dma_copy(x, t[s![5..(-9223372036854775807 - 1), ..]]);
    nisa::dma_copy(t, x.slice(1, -9223372036854775807 - 1, 9223372036854775807));
    nisa::dma_copy(t, x.reshape([4611686018427387904, 4]));
}

fn main() {}
