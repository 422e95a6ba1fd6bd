use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k() {
    let a = nl::ndarray([128, 64], nl::float8_e4m3fn_x4);
    let b = nl::ndarray([128, 256], nl::float4_e2m1fn_x4);
    // Data over four quadrants: scales keep them, 128 x 64 is the layout; 16 x 256 is too short.
    let sa = nl::ndarray([128, 64], nl::float8_e8m0fnu);
    let sb = nl::ndarray([16, 256], nl::float8_e8m0fnu);
    let d = nl::ndarray([64, 256], nl::float32, nl::psum);
    nisa::nc_matmul_mx(d, a, b, sa, sb);
}

fn main() {}
