use nki::prelude::*;

#[nki_kernel]
fn k(q: Hbm) {
    let k_tile = nl::ndarray([128, 512], nl::bfloat16);
    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(acc, q, k_tile);
}

fn main() {}
