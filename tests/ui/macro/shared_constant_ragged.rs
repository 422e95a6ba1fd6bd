use nki::prelude::*;

#[nki_kernel]
pub fn k() {
    let c = nl::shared_constant([[1.0, 2.0], [3.0]]);
}

fn main() {}
