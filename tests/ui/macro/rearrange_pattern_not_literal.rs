use nki::prelude::*;

#[nki_kernel]
fn k(name: &str) {
    let t = nl::ndarray([128, 24], nl::float32);
    let v = t.rearrange((name, "h"), ("p", "h"));
}

fn main() {}
