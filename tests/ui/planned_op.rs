use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let top = nl::ndarray([128, 8], nl::float32);
    let idx = nl::ndarray([128, 8], nl::uint32);
    nisa::topk(top, idx, x, 8);
}

fn main() {}
