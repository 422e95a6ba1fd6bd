use nki::prelude::*;

#[nki_kernel]
fn k() {
    let x = nl::ndarray([128, 64], nl::float32);
    let sum = nl::ndarray([1, 64], nl::float32);
    nisa::tensor_partition_reduce(sum, nl::multiply, x);
}

fn main() {}
