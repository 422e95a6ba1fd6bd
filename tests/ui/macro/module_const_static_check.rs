use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    /// Too many partitions for one SBUF tile.
    const TILE: i64 = 256;

    #[nki_kernel]
    fn k(x: Hbm) {
        let t = nl::ndarray([TILE, 4], nl::float32);
        nisa::dma_copy(t, x);
    }
}

fn main() {}
