use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let y = nl::ndarray([128, 64], nl::float32);
    nisa::activate2(y, nl::exp, x, 1.0, 2.0, nl::add, nl::multiply);
}

fn main() {}
