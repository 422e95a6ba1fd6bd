use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 8], nl::float32);
    let r = nl::ndarray([128, 4], nl::bfloat16);
    nisa::sendrecv(t, r, 1, 1, 0);
}

fn main() {}
