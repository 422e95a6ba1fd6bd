use nki::prelude::*;

#[nki_kernel]
fn k() {
    let st = nl::ndarray([128, 256], nl::bfloat16);
    let mv = nl::ndarray([128, 512], nl::bfloat16);
    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(acc, st, mv);
}

fn main() {}
