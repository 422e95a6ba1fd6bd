use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([16, 8], nl::float32);
    nisa::dma_copy(t, x[s![(0..128).step_by(8);2, 0..32;4]]);
}

fn main() {}
