use nki::prelude::*;

#[nki_helper]
fn takes_int(x: Hbm, n: i64) {}

#[nki_helper]
fn takes_register(x: Hbm, r: Register) {}

// Only a helper parameter declared `Register` takes a device loop's index; a
// kernel takes none.
#[nki_kernel]
fn k(x: Hbm, r: Register) {
    for i in nl::dynamic_range(4) {
        takes_int(x, i);
        takes_register(x, i);
    }
}

fn main() {}
