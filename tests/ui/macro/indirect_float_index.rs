use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k() {
    let t = nl::ndarray([128, 8], nl::float32);
    let ix = nl::ndarray([128, 2], nl::float32);
    let v = t.indirect(ix, num_elem = 4);
}

fn main() {}
