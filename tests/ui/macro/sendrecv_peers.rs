use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 8], nl::float32);
    let r = nl::ndarray([128, 8], nl::float32);
    nisa::sendrecv(t, r, 1, 0, 0);
    nisa::sendrecv(t, r, 2, 2, 0);
}

fn main() {}
