use nki::prelude::*;

#[nki_helper]
fn takes_int(x: Hbm, n: i64) {}

#[nki_helper]
fn takes_register(x: Hbm, r: Register) {}

// Only a helper parameter declared `Register` takes a device loop's index.
#[nki_kernel]
fn k(x: Hbm) {
    for i in nl::dynamic_range(4) {
        takes_int(x, i);
        takes_register(x, i);
    }
}

// A kernel's caller has no register to give or take.
#[nki_kernel]
fn takes(x: Hbm, r: Register) {}

#[nki_kernel]
fn gives(x: Hbm) -> Register {
    nisa::register_alloc()
}

fn main() {}
