use nki::prelude::*;

#[nki_kernel]
fn k() {
    for j in (0..10).step_by(3).rev() {
        let t = nl::ndarray([128, 4], nl::float32);
    }
}

fn main() {}
