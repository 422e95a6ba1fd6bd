// A kernel call passes the parameters with a default by keyword: one more
// positional argument is refused at the call, as the rule is stated.
use nki::prelude::*;

#[nki_kernel]
pub fn weighted(x: Hbm, bias: Option<Hbm>, y: Hbm, extra: Option<Hbm>, #[default(1.0)] scale: f64) -> Hbm {
    let out = nl::ndarray([128, 8], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, y);
    out
}

#[nki_kernel]
pub fn caller(a: Hbm, b: Hbm) -> Hbm {
    let out: Hbm = weighted(a, None, b, b);
    out
}

fn main() {}
