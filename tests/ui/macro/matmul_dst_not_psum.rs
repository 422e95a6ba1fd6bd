use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 128], nl::bfloat16);
    let b = nl::ndarray([128, 512], nl::bfloat16);
    let out = nl::ndarray([128, 512], nl::float32, buffer = nl::sbuf);
    nisa::nc_matmul(out, a, b);
}

fn main() {}
