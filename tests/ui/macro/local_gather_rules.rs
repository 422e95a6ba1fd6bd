use nki::prelude::*;

#[nki_kernel]
fn k() {
    let src = nl::ndarray([16, 64], nl::float32);
    let idx = nl::ndarray([16, 2], nl::uint32);
    let dst = nl::ndarray([16, 50], nl::bfloat16);
    nisa::local_gather(dst, src, idx, num_elem_per_idx = 3);
}

fn main() {}
