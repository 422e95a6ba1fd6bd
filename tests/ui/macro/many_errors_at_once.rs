use nki::prelude::*;

/// Every mistake is reported in one compile, each at its own tokens.
#[nki_kernel]
fn k(x: Hbm) {
    let big = nl::ndarray([512, 8], nl::float32);
    let wide = nl::ndarray([128, 4097], nl::float32, buffer = nl::psum);
    nisa::memset(big, undefined_value);
    nisa::dma_copy(x, wide);
}

fn main() {}
