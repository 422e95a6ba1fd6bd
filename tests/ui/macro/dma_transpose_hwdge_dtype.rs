use nki::prelude::*;

#[nki_kernel]
fn flip(x: Hbm) {
    let rows = nl::ndarray([16, 64], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(rows, x);
    let t = nl::ndarray([64, 16], nl::float32, buffer = nl::sbuf);
    nisa::dma_transpose(t, rows, dge_mode = nisa::dge_mode::hwdge);
}

fn main() {}
