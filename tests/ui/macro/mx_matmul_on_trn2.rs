use nki::prelude::*;

#[nki_kernel(target = "trn2")]
fn k() {
    let a = nl::ndarray([128, 64], nl::float8_e4m3fn_x4);
    let s = nl::ndarray([128, 64], nl::uint8);
    let d = nl::ndarray([64, 64], nl::float32, nl::psum);
    nisa::nc_matmul_mx(d, a, a, s, s);
}

fn main() {}
