use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let top = nl::ndarray([128, 4], nl::float32);
    nisa::max8(top, x);
}

fn main() {}
