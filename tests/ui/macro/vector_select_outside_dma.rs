use nki::prelude::*;

#[nki_kernel]
fn k(table: Hbm) {
    let i = nl::ndarray([128, 1], nl::int32);
    let d = nl::ndarray([128, 8], nl::float32);
    let rows = table.vector_select(0, i);
    nisa::dma_copy(d, rows);
}

fn main() {}
