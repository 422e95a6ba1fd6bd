use nki::prelude::*;

#[nki_kernel]
fn k() -> i64 {
    let mut total = 0;
    nl::fori_loop(0, 4, |i| {
        total += 1;
    });
    total
}

fn main() {}
