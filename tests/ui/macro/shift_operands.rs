use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = 1.5 << 2;
    let b = 1 << -1;
    let c = 1 << 70;
}

fn main() {}
