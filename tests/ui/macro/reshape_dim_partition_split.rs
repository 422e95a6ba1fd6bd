use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 24], nl::float32);
    let v = t.reshape_dim(0, [2, 64]);
}

fn main() {}
