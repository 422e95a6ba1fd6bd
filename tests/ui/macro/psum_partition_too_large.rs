use nki::prelude::*;

#[nki_kernel]
fn k() {
    let acc = nl::ndarray([200, 4], nl::float32, buffer = nl::psum);
}

fn main() {}
