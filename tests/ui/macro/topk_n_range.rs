use nki::prelude::*;

#[nki_kernel]
fn k() {
    let src = nl::ndarray([128, 3], nl::bfloat16);
    let vals = nl::ndarray([128, 4], nl::bfloat16);
    let idx = nl::ndarray([128, 4], nl::uint32);
    nisa::topk(vals, idx, src, 4);
}

fn main() {}
