use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let vals = nl::ndarray([128, 16], nl::float32);
    nisa::nc_match_replace8(x, x, vals, -1.0);
}

fn main() {}
