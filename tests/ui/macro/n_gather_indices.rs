use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let idx = nl::ndarray([128, 8], nl::int32);
    let out = nl::ndarray([128, 8], nl::float32);
    nisa::nc_n_gather(out, x, idx);
}

fn main() {}
