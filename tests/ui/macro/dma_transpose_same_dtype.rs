use nki::prelude::*;

#[nki_kernel]
fn flip(x: Hbm) {
    let t = nl::ndarray([16, 64], nl::bfloat16, buffer = nl::sbuf);
    nisa::dma_copy(t, x);
    let wide = nl::ndarray([64, 16], nl::float32, buffer = nl::sbuf);
    nisa::dma_transpose(wide, t);
}

fn main() {}
