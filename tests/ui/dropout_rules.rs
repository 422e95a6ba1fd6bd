use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let y = nl::ndarray([128, 64], nl::bfloat16);
    nisa::dropout(y, x, 1.5);
}

fn main() {}
