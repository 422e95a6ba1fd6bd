use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 4, 8], nl::float32);
    let s = nl::softmax(t, axis = 2);
}

fn main() {}
