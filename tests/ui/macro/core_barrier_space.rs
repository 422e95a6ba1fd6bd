use nki::prelude::*;

// A barrier meets on shared HBM or on an SBUF tile; a PSUM tile is refused.
#[nki_kernel]
fn k(x: Hbm) {
    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    nisa::core_barrier(acc, [0, 1]);
    let counter = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
    nisa::core_barrier(counter, [0, 1]);
    nisa::core_barrier(x, [0, 1]);
}

fn main() {}
