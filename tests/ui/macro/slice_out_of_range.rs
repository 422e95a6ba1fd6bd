use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 64], nl::float32);
    let u = nl::ndarray([128, 64], nl::float32);
    nisa::tensor_copy(u, t[s![.., 0..80]]);
}

fn main() {}
