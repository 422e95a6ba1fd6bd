use nki::prelude::*;

#[nki_kernel]
fn k() {
    let t = nl::ndarray([1, 1], nl::int32);
    nl::fori_loop(0, t, |i| {}, step = 2);
}

fn main() {}
