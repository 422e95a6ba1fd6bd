//! The library's `cascaded_max_utils`: the folded load that spreads each row
//! of a `[B, N]` HBM tensor over several partitions, and the rows and columns
//! of the `[B, S, V]` or `[BxS, V]` inputs of `cascaded_max` and
//! `rotational_topk`.

use nki::prelude::*;

pub use kernel::*;

/// The folded loads and the inputs' rows.
#[nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// The rows `B·S` and columns `V` of `t`, `[B, S, V]` or `[BxS, V]`:
    /// `(B·S, V)`. Another rank is refused with `kernel`'s words, `what`
    /// saying which shapes `t` may have.
    #[nki_helper]
    pub fn rows_and_vocab(t: Hbm, kernel: &str, what: &str) -> (i64, i64) {
        let rank = t.ndim();
        assert!(rank == 2 || rank == 3, "{kernel}: {what}, got {rank} dims");
        let shape = t.shape();
        let rows = if rank == 3 { shape[0] * shape[1] } else { shape[0] };
        (rows, shape[rank - 1])
    }

    /// Rows `[b0, b0 + rows)` of `data_hbm` `[B, N]` folded `fold_factor` ways
    /// into a new SBUF tile `[tile_rows · fold_factor, ceil(N / fold_factor)]`
    /// (`tile_rows >= rows`), as [`predicated_folded_load_into`] fills it.
    #[nki_helper]
    pub fn predicated_folded_load(data_hbm: Hbm, fold_factor: i64, b0: i64, rows: i64, tile_rows: i64, fill_value: f64) -> Sbuf {
        let n = data_hbm.shape()[1];
        let data_sb = nl::ndarray([tile_rows * fold_factor, n.div_ceil(fold_factor)], data_hbm.dtype(), buffer = nl::sbuf);
        predicated_folded_load_into(data_hbm, fold_factor, data_sb, b0, rows, fill_value);
        data_sb
    }

    /// Rows `[b0, b0 + rows)` of `data_hbm` `[B, N]` folded `fold_factor` ways
    /// into the SBUF tile `data_sb` (the library's `data_sb` argument; at least
    /// `rows · fold_factor` partitions and `c = ceil(N / fold_factor)` columns):
    /// fold `f` of row `b0 + i` (its columns `[f·c, (f+1)·c)`) lands on
    /// partition `i·fold_factor + f`, columns `[0, c)`. Everything the rows do
    /// not cover (the last fold's tail past `N`, the partitions of missing rows,
    /// columns past `c`) holds `fill_value`. With `N` a multiple of
    /// `fold_factor` the rows are one reshaped DMA; otherwise two per row: the
    /// first `N % c` columns of every fold (none when the last fold is empty),
    /// then the rest of every fold but the last.
    #[nki_helper]
    pub fn predicated_folded_load_into(data_hbm: Hbm, fold_factor: i64, data_sb: Sbuf, b0: i64, rows: i64, fill_value: f64) {
        let [batch, n] = data_hbm.shape();
        let c = n.div_ceil(fold_factor);
        nisa::memset(data_sb, fill_value);
        if n == fold_factor * c {
            let folded = data_hbm.reshape([batch * fold_factor, c]);
            nisa::dma_copy(data_sb[s![0..rows * fold_factor, 0..c]], folded[s![b0 * fold_factor..(b0 + rows) * fold_factor, ..]]);
        } else {
            let rem = n % c;
            let flat = data_hbm.reshape([batch * n]);
            for i in nl::affine_range(rows) {
                let (p0, base) = (i * fold_factor, (b0 + i) * n);
                if rem > 0 {
                    nisa::dma_copy(data_sb[s![p0..p0 + fold_factor, 0..rem]], flat.ap([[c, fold_factor], [1, rem]], offset = base));
                }
                nisa::dma_copy(
                    data_sb[s![p0..p0 + fold_factor - 1, rem..c]],
                    flat.ap([[c, fold_factor - 1], [1, c - rem]], offset = base + rem),
                );
            }
        }
    }
}
