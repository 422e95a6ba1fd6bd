use nki::prelude::*;

#[nki_kernel]
fn k() {
    let r = nl::affine_range(4);
    let f = nl::no_reorder(|| {});
}

fn main() {}
