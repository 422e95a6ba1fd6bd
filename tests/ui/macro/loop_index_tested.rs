use nki::prelude::*;

// A device loop's index is a register: tracing cannot read it.
#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 8], nl::float32);
    for i in nl::dynamic_range(4) {
        if i == 0 {
            nisa::dma_copy(t, x);
        }
        assert!(i < 4, "past the end");
        let first = if i != 0 { 1 } else { 0 };
        if i {}
        let both = !i && true;
    }
    nl::fori_loop(0, 4, |j| {
        assert_eq!(j, 2);
    });
}

fn main() {}
