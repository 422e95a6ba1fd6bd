use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 2], nl::float32);
    let v = nl::broadcast_to(t, [128, 8]);
}

fn main() {}
