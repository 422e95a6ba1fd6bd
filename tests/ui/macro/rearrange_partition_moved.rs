use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 4, 6], nl::float32);
    let v = t.rearrange(("p", "h", "w"), ("h", "p", "w"));
}

fn main() {}
