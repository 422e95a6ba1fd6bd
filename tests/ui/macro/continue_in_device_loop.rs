use nki::prelude::*;

#[nki_kernel]
fn k(#[dtypes(int32)] n: Hbm) {
    let n_sb = nl::ndarray([1, 1], nl::int32);
    nisa::dma_copy(n_sb, n);
    let reg = nisa::register_alloc();
    nisa::register_load(reg, n_sb);
    for _ in nl::dynamic_range(reg) {
        continue;
    }
    nl::fori_loop(0, reg, |i| {
        break;
    });
}

fn main() {}
