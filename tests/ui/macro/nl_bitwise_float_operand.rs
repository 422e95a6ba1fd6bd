use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 8], nl::float32);
    let i = nl::ndarray([128, 8], nl::int32);
    let a = nl::bitwise_and(t, i);
    let b = nl::left_shift(i, 1.5);
}

fn main() {}
