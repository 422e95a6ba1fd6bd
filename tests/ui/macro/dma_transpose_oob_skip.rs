use nki::prelude::*;

#[nki_kernel]
fn flip(x: Hbm) {
    let t = nl::ndarray([64, 16], nl::bfloat16, buffer = nl::sbuf);
    nisa::dma_transpose(t, x.ap([[64, 16], [1, 64]], offset = 0), oob_mode = nisa::oob_mode::skip);
}

fn main() {}
