use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 64], nl::bfloat16, buffer = nl::sbuf);
    nisa::dma_copy(t, x);
    let acc = nl::ndarray([64, 128], nl::float32, buffer = nl::psum);
    nisa::nc_transpose(acc, t, engine = nisa::engine::tensor);
    let f8 = nl::ndarray([32, 32], nl::float8_e4m3, buffer = nl::sbuf);
    let small = nl::ndarray([32, 32], nl::float32, buffer = nl::psum);
    nisa::nc_transpose(small, f8);
    let eye = nl::ndarray([128, 128], nl::bfloat16, buffer = nl::sbuf);
    let wide = nl::ndarray([64, 128], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(wide, t, eye, is_transpose = true);
    // Matching dtypes, and a plain matmul into float32 PSUM, are fine.
    let same = nl::ndarray([64, 128], nl::bfloat16, buffer = nl::psum);
    nisa::nc_transpose(same, t);
    nisa::nc_matmul(wide, t, eye);
}

fn main() {}
