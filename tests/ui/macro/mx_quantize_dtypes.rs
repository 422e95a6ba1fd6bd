use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let q = nl::ndarray([128, 16], nl::float8_e4m3fn_x4);
    let s = nl::ndarray([128, 16], nl::float8_e8m0fnu);
    nisa::quantize_mx(q, x, s);
}

fn main() {}
