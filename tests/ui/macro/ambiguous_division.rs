use nki::prelude::*;

#[nki_helper]
fn tiles(x: Hbm) -> i64 {
    x.shape()[0]
}

#[nki_kernel]
fn k(x: Hbm) -> i64 {
    let n = tiles(x);
    n / 128
}

fn main() {}
