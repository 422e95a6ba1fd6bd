use nki::prelude::*;

#[nki_kernel]
fn k(table: Hbm) {
    let idx = nl::ndarray([128, 1], nl::int32);
    let one = nl::ndarray([1, 1], nl::int32);
    let rows = nl::ndarray([128, 64], nl::float32);
    nisa::dma_copy(rows, table.ap([[64, 128], [1, 64]], scalar_offset = one, vector_offset = idx));
}

fn main() {}
