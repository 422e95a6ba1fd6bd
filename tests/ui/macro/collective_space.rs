use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 64], nl::float32, buffer = nl::sbuf);
    let rg = ncc::ReplicaGroup([[0, 1]]);
    ncc::all_to_all([x], [t], rg, 0);
}

fn main() {}
