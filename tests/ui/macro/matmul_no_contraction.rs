use nki::prelude::*;

#[nki_kernel]
fn k() {
    let q = nl::ndarray([64, 128], nl::bfloat16);
    let kt = nl::ndarray([128, 512], nl::bfloat16);
    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(acc, q, kt);
}

fn main() {}
