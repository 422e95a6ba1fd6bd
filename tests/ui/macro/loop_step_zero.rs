use nki::prelude::*;

#[nki_kernel]
fn k() {
    for _ in nl::affine_range(0, 8, 0) {}
}

fn main() {}
