use nki::prelude::*;

#[nki_kernel]
fn k() {
    let idx = nl::ndarray([128, 1], nl::int32);
    let table = nl::ndarray([128, 64], nl::float32);
    let rows = nl::ndarray([128, 64], nl::float32);
    // A compute engine cannot follow the offsets: the view must be a DMA operand.
    nisa::tensor_copy(rows, table.ap([[64, 128], [1, 64]], vector_offset = idx));
}

fn main() {}
