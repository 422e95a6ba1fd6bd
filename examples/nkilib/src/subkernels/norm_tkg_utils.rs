//! What the decode-phase norms (`rmsnorm_tkg`, `layernorm_tkg`) share: the
//! `[128, B·S, H/128]` output layout, the part of it a program works on, and
//! the loads of the rows and of gamma (or beta) into that layout.
//!
//! For `n` hidden shards (`H2 = H/128/n`) element `h` of a row lands in column
//! `c` of partition `p` with `h = (c / H2)·(H/n) + p·H2 + c % H2`; with
//! `hidden_dim_tp` (one shard) `h = c·128 + p`. A program holds `held` shards
//! starting at `first`: all of them, or its own one when the hidden dim is
//! split over the programs (`shard_on_h`). The loads are strided DMAs whose
//! access patterns are these layouts.

use nki::prelude::*;

pub use helpers::*;

/// The loads into the layout.
#[nki_module]
pub mod helpers {
    use nki::prelude::*;

    /// Partitions of the output layout: `H` is spread over them.
    pub const H0: i64 = 128;

    /// Loads rows `row0..row0 + rows` of `src` (`[rows, H]`: the input's rows,
    /// or gamma's one) into `dst` `[128, rows, cols]`: in the `hidden_dim_tp`
    /// layout, or the `held` hidden shards from `first` of a layout of `shards`.
    #[nki_helper]
    pub fn load_input_to_sbuf(src: Hbm, dst: Sbuf, row0: i64, rows: i64, shards: i64, first: i64, held: i64, hidden_dim_tp: bool) {
        let h = src.shape()[1];
        if hidden_dim_tp {
            let h1 = h / H0;
            nisa::dma_copy(dst[s![.., 0..rows, ..]], src.ap([[1, H0], [h, rows], [H0, h1]], offset = row0 * h));
        } else {
            let shard = h / shards;
            let h2 = shard / H0;
            for i in nl::affine_range(held) {
                nisa::dma_copy(
                    dst[s![.., 0..rows, i * h2..(i + 1) * h2]],
                    src.ap([[h2, H0], [h, rows], [1, h2]], offset = row0 * h + (first + i) * shard),
                );
            }
        }
    }

    /// A `[1, H]` weight (gamma or beta) in the layout of
    /// `load_input_to_sbuf`, `[128, 1, cols]`.
    #[nki_helper]
    pub fn load_gamma_to_sbuf(gamma: Hbm, cols: i64, shards: i64, first: i64, held: i64, hidden_dim_tp: bool) -> Sbuf {
        let g = nl::ndarray([H0, 1, cols], gamma.dtype(), buffer = nl::sbuf);
        load_input_to_sbuf(gamma, g, 0, 1, shards, first, held, hidden_dim_tp);
        g
    }
}
