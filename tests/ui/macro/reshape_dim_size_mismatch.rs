use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 24], nl::float32);
    nisa::dma_copy(t, x);
    let v = t.reshape_dim(1, [5, -1]);
}

fn main() {}
