use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) -> i64 {
    let total = 0;
    for i in 0..4 {
        total += i;
    }
    total
}

fn main() {}
