use nki::prelude::*;

// A device loop's index cannot stand where the trace fixes an integer.
#[nki_kernel]
fn k(x: Hbm) {
    let t = nl::ndarray([128, 8], nl::float32);
    let sizes = [1, 2, 3, 4];
    for i in nl::dynamic_range(4) {
        let shaped = nl::ndarray([i, 8], nl::float32);
        nisa::memset(t, i);
        nisa::dma_copy(t[s![.., 0..i]], x[s![0..128, 0..i]]);
        nisa::dma_copy(t[s![.., nl::ds(i, 1)]], x[s![0..128, 0..1]]);
        nisa::dma_copy(t[s![i, ..]], x[s![0..1, ..]]);
        let n = sizes[i];
        let copies = [0; i];
        let k = i as i64;
        assert!(true, "at {}", i);
        for j in 0..i {}
    }
}

fn main() {}
