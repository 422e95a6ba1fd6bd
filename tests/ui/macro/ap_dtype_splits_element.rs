use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 7], nl::bfloat16);
    let v = t.ap([[8, 128], [1, 3]], dtype = nl::float32);
}

fn main() {}
