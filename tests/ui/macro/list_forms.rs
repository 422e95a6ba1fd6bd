use nki::prelude::*;

// A list of tiles is `(0..n).map(|i| x).collect()` over a Rust range, one
// expression per element.
#[nki_kernel]
fn k(x: Hbm) {
    let n = 4;
    let same = [nl::ndarray([128, 1], nl::float32); 4];
    let ranged = nl::affine_range(n).map(|_| nl::ndarray([128, 1], nl::float32)).collect();
    let statements = (0..n).map(|_| {
        let t = nl::ndarray([128, 1], nl::float32);
        t
    }).collect();
    let keyed = (0..n).map(|i| i).collect::<std::collections::HashSet<i64>>();
    let tiles = (0..n).map(|_| nl::ndarray([128, 1], nl::float32)).collect();
    let past = tiles[4];
    for i in nl::dynamic_range(n) {
        let at = tiles[i];
    }
}

// Kernels take and return tensors one by one.
#[nki_kernel]
fn takes_list(tiles: Vec<Sbuf>) {}

#[nki_kernel]
fn returns_list(x: Hbm) -> Vec<Hbm> {
    (0..2).map(|_| x).collect()
}

fn main() {}
