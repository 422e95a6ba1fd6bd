use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let top = nl::ndarray([128, 8], nl::float32);
    nisa::max8(top, x);
    let idx = nl::ndarray([128, 8], nl::float32);
    nisa::nc_find_index8(idx, x, top);
}

fn main() {}
