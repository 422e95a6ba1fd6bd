use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let e = nl::exp(x);
    let s = nl::multiply(x, 2.0);
}

fn main() {}
