use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([256, 4], nl::float32, nl::shared_hbm);
    let s = nl::load(t);
}

fn main() {}
