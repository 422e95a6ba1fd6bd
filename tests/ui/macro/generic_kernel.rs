use nki::prelude::*;

#[nki_kernel]
fn k<const P: usize>(x: Hbm) -> Hbm {
    x
}

fn main() {}
