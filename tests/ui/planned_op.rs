use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let y = nl::ndarray([128, 64], nl::float32);
    nisa::dma_compute(y, [x, x], nl::add);
}

fn main() {}
