use nki::prelude::*;

#[nki_kernel]
fn flip(x: Hbm) {
    let cube = x.ap([[32, 2], [16, 2], [8, 2], [4, 2], [1, 4]], offset = 0);
    let t = nl::ndarray([4, 2, 2, 2, 2], nl::bfloat16, buffer = nl::sbuf);
    nisa::dma_transpose(t, cube);
}

fn main() {}
