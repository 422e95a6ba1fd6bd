use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) -> i64 {
    let [n, m] = x.shape();
    for i in 0..4 {
        let n = i * 2;
    }
    n
}

fn main() {}
