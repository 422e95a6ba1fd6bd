use nki::prelude::*;

/// A PSUM tensor may span banks, but not more than the 8 banks of 2 KiB a
/// partition has.
#[nki_kernel]
fn k() {
    let fits = nl::ndarray([128, 1024], nl::float32, buffer = nl::psum);
    let acc = nl::ndarray([128, 4097], nl::float32, buffer = nl::psum);
}

fn main() {}
