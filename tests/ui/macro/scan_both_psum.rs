use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 64], nl::float32, nl::psum);
    let b = nl::ndarray([128, 64], nl::float32, nl::psum);
    let out = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_tensor_scan(out, a, b, 0.0, nl::multiply, nl::add);
}

fn main() {}
