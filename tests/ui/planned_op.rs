use nki::prelude::*;

#[nki_kernel]
fn k() {
    let c = nl::shared_constant(1.0);
}

fn main() {}
