use nki::prelude::*;

/// `#[range(...)]` bounds ints and floats with `>=`, `>`, `<=` or `<` and a number.
#[nki_kernel]
fn k(#[range(>= 0.0)] x: Hbm, #[range(== 1)] n: i64, #[range()] m: i64, #[range(< one)] r: f64, #[range(> 1e400)] s: f64) -> Hbm {
    x
}

fn main() {}
