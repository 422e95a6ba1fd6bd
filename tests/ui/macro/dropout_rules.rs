use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let y = nl::ndarray([128, 64], nl::bfloat16);
    nisa::dropout(y, x, 1.5);
    let ints = nl::ndarray([128, 64], nl::int32);
    let rates = nl::ndarray([128, 1], nl::bfloat16);
    nisa::dropout(ints, ints, rates);
}

fn main() {}
