use nki::prelude::*;

#[nki_kernel(target = "trn2")]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let y = nl::ndarray([128, 64], nl::float32);
    nisa::activate2(y, nl::exp, x, 2.0, 1.0, nl::multiply, nl::add);
}

fn main() {}
