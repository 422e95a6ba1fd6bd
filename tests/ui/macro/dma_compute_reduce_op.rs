use nki::prelude::*;

#[nki_kernel]
fn k(a: Hbm, b: Hbm) {
    nisa::dma_compute(a, [a, b], nl::maximum);
}

fn main() {}
