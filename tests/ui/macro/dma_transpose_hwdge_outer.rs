use nki::prelude::*;

#[nki_kernel]
fn flip(x: Hbm) {
    let t = nl::ndarray([64, 32], nl::bfloat16, buffer = nl::sbuf);
    nisa::dma_transpose(t, x.ap([[64, 32], [1, 64]], offset = 0), dge_mode = nisa::dge_mode::hwdge);
}

fn main() {}
