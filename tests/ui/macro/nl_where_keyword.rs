use nki::prelude::*;

/// `where` is a Rust keyword: rustc's one error suggests `nl::r#where`; the
/// kernel's generated API still exists, so the caller below adds nothing.
#[nki_kernel]
fn k(x: Hbm) -> Hbm {
    let c = nl::ndarray([128, 4], nl::float32);
    let a = nl::ndarray([128, 4], nl::float32);
    let v = nl::where(c, a, 0.0);
    x
}

fn main() {
    let t = Tensor::zeros(&[128, 4], Dtype::F32).unwrap();
    let _ = k::Call::new(&t).launch(&Launch::new());
}
