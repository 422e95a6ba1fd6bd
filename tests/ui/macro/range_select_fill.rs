use nki::prelude::*;

#[nki_kernel]
fn k() {
    let s = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
    let m = nl::ndarray([128, 512], nl::float32);
    let lo = nl::ndarray([128, 1], nl::float32);
    let hi = nl::ndarray([128, 1], nl::float32);
    nisa::range_select(m, s, nl::greater_equal, nl::less_equal, lo, hi, on_false_value = -1e30);
}

fn main() {}
