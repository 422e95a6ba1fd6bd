use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 8], nl::float32, nl::sbuf);
    let b = nl::ndarray([128, 6], nl::float32, nl::sbuf);
    let c = nl::add(a, b);
}

fn main() {}
