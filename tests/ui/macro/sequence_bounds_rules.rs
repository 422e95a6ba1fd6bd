use nki::prelude::*;

#[nki_kernel]
fn k() {
    let ids = nl::ndarray([2, 16], nl::bfloat16);
    let out = nl::ndarray([1, 2, 8], nl::float32);
    nisa::sequence_bounds(out, ids);
}

fn main() {}
