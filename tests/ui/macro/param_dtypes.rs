use nki::prelude::*;

/// `#[dtypes(...)]` names `nl` dtypes, on tensor parameters only.
#[nki_kernel]
fn k(#[dtypes(float33)] x: Hbm, #[dtypes(float32)] n: i64) -> Hbm {
    x
}

fn main() {}
