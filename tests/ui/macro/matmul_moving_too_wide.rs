use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let st = nl::ndarray([128, 128], nl::bfloat16);
    let mv = nl::ndarray([128, 2048], nl::bfloat16);
    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(acc, st, mv[s![.., 0..1024]]);
}

fn main() {}
