use nki::prelude::*;

#[nki_kernel]
fn k() {
    let stats = nl::ndarray([128, 8], nl::float32);
    let mean_var = nl::ndarray([128, 3], nl::float32);
    nisa::bn_aggr(mean_var, stats);
}

fn main() {}
