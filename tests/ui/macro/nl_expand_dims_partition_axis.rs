use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 8], nl::float32);
    let v = nl::expand_dims(t, 0);
}

fn main() {}
