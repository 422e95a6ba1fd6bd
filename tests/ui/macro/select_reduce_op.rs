use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let mask = nl::ndarray([128, 64], nl::uint8);
    nisa::select_reduce(x, mask, x, 0.0, reduce_op = nl::add);
}

fn main() {}
