use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let top = nl::ndarray([128, 8], nl::float32);
    nisa::tensor_tensor_scan(top, x, x, 0.0, nl::multiply, nl::add);
}

fn main() {}
