use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([64, 32], nl::float32, nl::sbuf);
    let y = nl::ndarray([64, 16], nl::float32, nl::sbuf);
    let p = nl::matmul(x, y);
}

fn main() {}
