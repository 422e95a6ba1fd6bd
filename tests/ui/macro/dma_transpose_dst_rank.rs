use nki::prelude::*;

/// The library's 4-d source form needs a 4-d destination: NKI stopped padding a
/// lower-rank dst in SDK 2.30.
#[nki_kernel]
fn flip(q: Hbm) {
    let t = nl::ndarray([64, 128], nl::bfloat16, buffer = nl::sbuf);
    nisa::dma_transpose(t, q.ap([[64, 128], [1, 1], [1, 1], [1, 64]], offset = 0));
}

fn main() {}
