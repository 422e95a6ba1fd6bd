use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 8], nl::float32);
    let i = nl::ndarray([128, 4], nl::float32);
    let v = nl::gather_flattened(t, i);
}

fn main() {}
