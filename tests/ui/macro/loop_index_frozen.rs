use nki::prelude::*;

// The index of nl::dynamic_range is frozen; fori_loop's index is a copy the body may change.
#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([1, 1], nl::int32);
    nisa::dma_copy(t, x);
    for i in nl::dynamic_range(4) {
        nisa::register_move(i, 3);
        nisa::register_load(i, t);
        let own = nisa::register_alloc();
        nisa::register_move(own, i);
    }
    nl::fori_loop(0, 4, |j| {
        nisa::register_move(j, 3);
    });
}

fn main() {}
