use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let c = nl::ndarray([128, 8], nl::float32);
    let a = nl::ndarray([128, 4], nl::float32);
    let v = nl::r#where(c, a, 0.0);
}

fn main() {}
