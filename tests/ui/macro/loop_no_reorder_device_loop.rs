use nki::prelude::*;

#[nki_kernel]
fn k() {
    nl::no_reorder(|| {
        for _ in nl::static_range(2) {}
        nl::fori_loop(0, 4, |i| {});
        for _ in nl::dynamic_range(4) {}
    });
}

fn main() {}
