use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let a = nl::ndarray([128, 4], nl::float32);
    let b = nl::ndarray([128, 4], nl::float32);
    nisa::tensor_tensor(b, a, a, op = nl::max);
}

fn main() {}
