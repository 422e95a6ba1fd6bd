use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 64], nl::float32);
    let r = nl::ndarray([1, 64], nl::float32);
    nisa::tensor_reduce(r, nl::add, t, 0);
}

fn main() {}
