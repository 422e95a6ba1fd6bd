use nki::prelude::*;

#[nki_kernel]
fn k() {
    let off_bank = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, address = (0, 1024));
    let past_psum = nl::ndarray([128, 512], nl::float32, buffer = nl::psum, address = (0, 8 * 2048));
    let past_partitions = nl::ndarray([64, 4], nl::float32, address = (65, 0));
    let negative = nl::ndarray([64, 4], nl::float32, address = (0, -4));
    let fits = nl::ndarray([64, 4], nl::float32, address = (64, 16));
}

fn main() {}
