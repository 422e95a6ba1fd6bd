use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let mask = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_copy_predicated(x, 0.0, mask);
}

fn main() {}
