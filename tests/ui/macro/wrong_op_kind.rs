use nki::prelude::*;

#[nki_kernel]
fn k() {
    let a = nl::ndarray([128, 64], nl::float32);
    nisa::activation(a, nl::add, a);
    nisa::tensor_tensor(a, a, a, nl::exp);
    // The ALU table's unary ops are ALU ops of tensor_scalar_reduce; other activations are not.
    nisa::tensor_scalar_reduce(a, a, nl::abs, 0.0, nl::maximum);
    nisa::tensor_scalar_reduce(a, a, nl::exp, 0.0, nl::maximum);
}

fn main() {}
