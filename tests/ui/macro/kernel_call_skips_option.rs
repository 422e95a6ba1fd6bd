// A kernel call binds its positional arguments as the emitted Python does: an
// `Option` before a required parameter takes one too (`None` when absent).
use nki::prelude::*;

#[nki_kernel]
pub fn weighted(x: Hbm, bias: Option<Hbm>, y: Hbm) -> Hbm {
    let out = nl::ndarray([128, 8], x.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(out, y);
    out
}

#[nki_kernel]
pub fn caller(a: Hbm, b: Hbm) -> Hbm {
    let out: Hbm = weighted(a, b);
    out
}

fn main() {}
