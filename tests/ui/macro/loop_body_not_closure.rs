use nki::prelude::*;

#[nki_kernel]
fn k() {
    nl::fori_loop(0, 4, 1);
}

fn main() {}
