use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([4, 4], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(t, x);
    continue;
    for _ in nl::static_range(2) {
        nl::no_reorder(|| {
            nisa::dma_copy(x, t);
            continue;
        });
    }
}

fn main() {}
