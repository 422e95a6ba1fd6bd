use nki::prelude::*;

// NKI has no arithmetic on registers, a device loop's index among them.
#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([1, 8], nl::float32);
    for i in nl::dynamic_range(4) {
        nisa::dma_copy(t, x.ap([[8, 1], [1, 8]], offset = i * 10 + 1));
        let back = -i;
    }
    nl::fori_loop(0, 4, |j| {
        let next = j + 1;
    });
}

fn main() {}
