use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let v = nl::shared_identity_matrix(256);
}

fn main() {}
