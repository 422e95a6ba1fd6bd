use nki::prelude::*;

/// The closure is reported once; the kernel's generated API still exists, so the
/// caller below produces no further errors.
#[nki_kernel]
fn scale_rows(x: Hbm) -> Hbm {
    let double = |v: i64| v * 2;
    x
}

fn main() {
    let t = Tensor::zeros(&[128, 4], Dtype::F32).unwrap();
    let _ = scale_rows::Call::new(&t).launch(&Launch::new());
    println!("{}", scale_rows::NKI_SOURCE);
}
