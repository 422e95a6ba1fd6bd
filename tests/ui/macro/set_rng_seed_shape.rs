use nki::prelude::*;

#[nki_kernel]
fn k() {
    let seed = nl::ndarray([1, 2], nl::uint32);
    nisa::set_rng_seed(seed);
}

fn main() {}
