use nki::prelude::*;

// A helper's result is a trailing `if … else` whose branch binds a name first.
#[nki_helper]
fn tile_of(wide: bool) -> i64 {
    if wide {
        let base = 256;
        base * 2
    } else {
        128
    }
}

#[nki_kernel]
fn k(x: Hbm, wide: bool) -> Hbm {
    let out = nl::ndarray([128, 512], x.dtype(), buffer = nl::shared_hbm);
    for _ in 0..tile_of(wide) {
        nisa::dma_copy(out, x);
    }
    out
}

fn main() {}
