use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 64], nl::float32);
    nisa::activation(a, nl::add, a);
    nisa::tensor_tensor(a, a, a, nl::exp);
}

fn main() {}
