use nki::prelude::*;

#[nki_kernel]
fn k(a: Hbm, b: Hbm) -> Hbm {
    a + b
}

fn main() {}
