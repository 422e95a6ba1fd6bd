use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 8], nl::float32);
    let i = nl::ndarray([128, 1], nl::int32);
    let d = nl::ndarray([128, 8], nl::float32);
    nisa::dma_copy(d, t.vector_select(1, i));
}

fn main() {}
