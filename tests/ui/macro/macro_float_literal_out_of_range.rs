use nki::prelude::*;

/// Float literals beyond the range of f64 would be infinite: they are rejected
/// at their token, in the body and in parameter defaults.
#[nki_kernel]
fn k(#[default(1e400)] scale: f64) -> f64 {
    let y = 1e400;
    let tiny = 1e-400;
    scale * y * tiny
}

fn main() {}
