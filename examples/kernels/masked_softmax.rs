//! Masked softmax written with `nki.language` tile functions.

use nki::prelude::*;

/// `softmax(where(mask != 0, x * scale, -30000))` along the rows of an `[N, D]`
/// tensor (`N` a multiple of 128), with `mask` of `x`'s shape in any float or
/// integer dtype (a bool mask as uint8); the
/// output has `x`'s dtype. A row the mask hides entirely comes out uniform.
///
/// Per 128-row block: `nl.load` the scores as float32 and the mask, scale the
/// scores with `nl.multiply`, replace the hidden ones with `nl.where`, then
/// `nl.softmax` over the row into the output dtype and `nl.store`.
#[nki_kernel]
pub fn masked_softmax(
    x: Hbm,
    #[dtypes(float32, bfloat16, float16, int32, uint32, int16, uint16, int8, uint8)] mask: Hbm,
    #[default(1.0)] scale: f64,
) -> Hbm {
    // Rows per block (the partitions) and the score a hidden element takes: low
    // enough that exp() of it underflows to 0 next to any visible score, finite so
    // a fully hidden row stays a number.
    let rows = nl::tile_size::pmax;
    let hidden = -30000.0;
    let [n, d] = x.shape();
    let [mn, md] = mask.shape();
    assert!(n % rows == 0, "rows must be a multiple of 128, got {n}");
    assert!(mn == n && md == d, "mask must be [{n}, {d}], got [{mn}, {md}]");
    let out = nl::ndarray([n, d], x.dtype(), buffer = nl::shared_hbm);
    for i in 0..n / rows {
        let r = nl::ds(i * rows, rows);
        let scores = nl::multiply(nl::load(x[s![r, ..]], dtype = nl::float32), scale);
        let keep = nl::load(mask[s![r, ..]]);
        let masked = nl::r#where(keep, scores, hidden);
        nl::store(out[s![r, ..]], nl::softmax(masked, axis = 1, dtype = x.dtype()));
    }
    out
}
