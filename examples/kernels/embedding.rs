//! Embedding lookup: rows of a table gathered by token ids with an indirect DMA.

use nki::prelude::*;

/// `out[t, :] = table[ids[t, 0], :]` for a `[V, D]` float table and `[T, 1]`
/// int32 or uint32 ids (`T` a multiple of 128).
///
/// Per tile of 128 tokens: the ids move into a `(128, 1)` SBUF column, then one
/// `nisa.dma_copy` reads `table.ap([[D, 128], [1, D]], vector_offset = ids)`,
/// whose row `p` starts at `ids[p] * D` (the stride of the table's dim 0), and
/// writes the gathered rows straight into the output's tile. An id outside
/// `0..V` is an error (the DMA's default `oob_mode`).
#[nki_kernel]
pub fn embedding(table: Hbm, #[dtypes(int32, uint32)] ids: Hbm) -> Hbm {
    let p = 128; // tokens per gather: one id per SBUF partition
    let [_, d] = table.shape();
    let [t, _] = ids.shape();
    assert!(t % p == 0, "token count must be a multiple of {p}, got {t}");
    let out = nl::ndarray([t, d], table.dtype(), buffer = nl::shared_hbm);
    for i in 0..t / p {
        let idx = nl::ndarray([p, 1], ids.dtype());
        nisa::dma_copy(idx, ids[s![i * p..(i + 1) * p, ..]]);
        nisa::dma_copy(out[s![i * p..(i + 1) * p, ..]], table.ap([[d, p], [1, d]], vector_offset = idx));
    }
    out
}
