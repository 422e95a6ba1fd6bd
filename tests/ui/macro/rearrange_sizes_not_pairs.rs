use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([128, 24], nl::float32);
    let v = t.rearrange(("p", ("h", "w")), ("p", "w", "h"), fixed_sizes = 4);
}

fn main() {}
