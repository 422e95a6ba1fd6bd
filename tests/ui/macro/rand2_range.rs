use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k() {
    let u = nl::ndarray([128, 64], nl::float32);
    nisa::rand2(u, 1.0, -1.0);
}

fn main() {}
