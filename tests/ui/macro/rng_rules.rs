use nki::prelude::*;

#[nki_kernel(target = "trn1")]
fn k() {
    let bits = nl::ndarray([128, 64], nl::float32);
    nisa::rng(bits, engine = nisa::engine::vector);
    let ints = nl::ndarray([128, 64], nl::uint32, buffer = nl::psum);
    nisa::rng(ints, engine = nisa::engine::gpsimd);
}

fn main() {}
