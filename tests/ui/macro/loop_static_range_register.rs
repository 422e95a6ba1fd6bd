use nki::prelude::*;

#[nki_kernel]
fn k() {
    let reg = nisa::register_alloc(4);
    for _ in nl::static_range(reg) {}
}

fn main() {}
