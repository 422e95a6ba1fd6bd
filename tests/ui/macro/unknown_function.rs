use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_tensr(a, a, a, nl::add);
}

fn main() {}
