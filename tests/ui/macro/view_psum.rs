use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 8], nl::float32, nl::psum);
    let v = t.view(nl::int32);
}

fn main() {}
