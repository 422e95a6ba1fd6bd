use nki::prelude::*;

#[nki_kernel]
fn k() {
    let d = nl::ndarray([128, 8], nl::float32);
    let s = nl::ndarray([128, 4], nl::float32);
    let p = nl::ndarray([128, 8], nl::float32, nl::psum);
    nisa::dma_compute(d, [s, p], nl::add);
}

fn main() {}
