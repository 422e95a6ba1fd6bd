use nki::prelude::*;

#[nki_kernel]
fn k(step: i64) {
    let reg = nisa::register_alloc(4);
    for _ in nl::dynamic_range(0, reg, step) {}
}

fn main() {}
