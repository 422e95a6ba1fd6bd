use nki::prelude::*;

#[nki_kernel]
fn store(out: Hbm) {
    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    nisa::dma_copy(out, acc);
}

fn main() {}
