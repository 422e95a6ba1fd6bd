use nki::prelude::*;

#[nki_kernel]
fn k() {
    nl::while_loop(1, |r| r);
}

fn main() {}
