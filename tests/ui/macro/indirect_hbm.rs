use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k(x: Hbm) {
    let ix = nl::ndarray([128, 2], nl::int32);
    let v = x.indirect(ix);
}

fn main() {}
