use nki::prelude::*;

#[nki_kernel]
fn k() {
    let acc = nl::ndarray([128, 1024], nl::float32, buffer = nl::psum);
}

fn main() {}
