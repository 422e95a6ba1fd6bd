use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let y = nl::ndarray([128, 64], nl::float32, buffer = nl::shared_hbm);
    let rg = ncc::ReplicaGroup([[0, 1]]);
    ncc::all_reduce([x], [y], rg, nl::multiply);
}

fn main() {}
