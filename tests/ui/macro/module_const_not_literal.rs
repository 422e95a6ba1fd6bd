use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    const TILE: i64 = 64 * 2;

    #[nki_kernel]
    fn k(x: Hbm) {
        let t = nl::ndarray([TILE, 4], nl::float32);
        nisa::dma_copy(t, x);
    }
}

fn main() {}
