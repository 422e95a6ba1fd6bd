use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    nisa::exponential(x, x);
}

fn main() {}
