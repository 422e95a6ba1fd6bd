use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 8], nl::float32);
    let ix = nl::ndarray([128, 2], nl::int32);
    let v = t.indirect(ix);
}

fn main() {}
