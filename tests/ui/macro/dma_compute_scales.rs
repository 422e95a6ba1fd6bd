use nki::prelude::*;

#[nki_kernel]
fn k(a: Hbm, b: Hbm) {
    nisa::dma_compute(a, [a, b], nl::add, scales = [1.0, 0.5]);
}

fn main() {}
