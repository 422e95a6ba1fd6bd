use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 64], nl::float32);
    let b = nl::ndarray([128, 32], nl::float32);
    nisa::tensor_tensor(a, a, b, nl::add);
}

fn main() {}
