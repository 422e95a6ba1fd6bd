use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 7], nl::bfloat16);
    let v = t.view(nl::float32);
}

fn main() {}
