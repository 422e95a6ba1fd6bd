use nki::prelude::*;

#[nki_kernel]
fn k(x: Hbm, w: Hbm) {
    let t = nl::load(x);
    let s = nl::load(w);
    let y = nl::rms_norm(t, s, 1, 8, compute_dtype = nl::bfloat16);
}

fn main() {}
