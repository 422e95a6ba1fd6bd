use nki::prelude::*;

#[nki_kernel]
fn k(n: i64) {
    let mut i = 0;
    while i < n {
        i += 1;
    }
}

fn main() {}
