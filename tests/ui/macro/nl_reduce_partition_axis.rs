use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 8, 4], nl::float32, nl::sbuf);
    let s = nl::sum(t, 1);
}

fn main() {}
