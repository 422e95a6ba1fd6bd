use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm) {
    let y = nl::ndarray([64, 64], nl::float32, buffer = nl::shared_hbm);
    let rg = ncc::ReplicaGroup([[0, 1]]);
    ncc::reduce_scatter([x], [y], rg, 1, nl::add);
}

fn main() {}
