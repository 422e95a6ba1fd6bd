use nki::prelude::*;

#[nki_kernel]
fn k(table: Hbm, ids: Hbm) {
    let rows = nl::ndarray([128, 64], nl::float32);
    nisa::dma_copy(rows, table.ap([[64, 128], [1, 64]], vector_offset = ids));
}

fn main() {}
