use nki::prelude::*;

/// The checker tracks every element of a list, so `[x; n]` holds at most 4096
/// elements (nested lists counted); longer ones are errors, not allocations.
#[nki_kernel]
fn k() {
    let a = [0; 1 << 40];
    let b = [0; 1099511627776];
    let c = [0; 100_000_000];
    let d = [[0; 64]; 64];
    let fine = [0; 4096];
}

fn main() {}
