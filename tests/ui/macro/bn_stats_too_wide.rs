use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 1024], nl::float32);
    let stats = nl::ndarray([128, 6], nl::float32);
    nisa::bn_stats(stats, x);
}

fn main() {}
