use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 256], nl::bfloat16, nl::sbuf);
    let t = nl::transpose(x);
}

fn main() {}
