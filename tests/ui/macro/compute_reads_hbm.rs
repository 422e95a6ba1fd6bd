use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let y = nl::ndarray([128, 64], nl::float32);
    nisa::activation(y, nl::exp, x);
}

fn main() {}
