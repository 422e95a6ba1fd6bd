use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm, f: &dyn Fn(i64) -> i64) -> Hbm {
    x
}

fn main() {}
