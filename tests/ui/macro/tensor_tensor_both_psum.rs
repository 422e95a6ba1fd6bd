use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 64], nl::float32, buffer = nl::psum);
    let b = nl::ndarray([128, 64], nl::float32, buffer = nl::psum);
    let c = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_tensor(c, a, b, nl::multiply);
}

fn main() {}
