use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let idx = nl::ndarray([128, 64], nl::float32);
    nisa::nonzero_with_count(idx, x);
}

fn main() {}
