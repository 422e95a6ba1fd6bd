//! What both output projections share: the library's
//! `output_projection_utils`, head packing, and the tile and fp8 constants.
//!
//! A head dim below the 128 partitions leaves the PE array's rows idle; with
//! `G` heads stacked on the partitions one matmul contracts `G·D` rows. The
//! weight's `[N·D, H]` rows are already in that order (head `n'·G + g`, row
//! `d` is row `(n'·G + g)·D + d` = packed head `n'`, row `g·D + d`), so only
//! the activations are rearranged.

pub use kernel::*;

/// The head-packing helper and the shared constants.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Partitions of an SBUF tile: rows per tile, contraction rows per matmul.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Columns of one fp32 PSUM bank: a matmul's moving free size.
    pub const F_MAX: i64 = nl::tile_size::psum_fmax;
    /// The largest finite `float8_e4m3`: statically quantized activations span `±240`.
    pub const FP8_MAX: f64 = 240.0;
    /// The dtype of statically quantized activations and weights.
    pub const QUANT_DTYPE: Dtype = nl::float8_e4m3;

    /// The library's `calculate_head_packing`: `(N', D', G)` with `G` the most
    /// heads dividing `N` whose rows fit in `partition_size` (`G·D <=
    /// partition_size`, at least 1), `N' = N / G` and `D' = G·D`.
    #[nki_helper]
    pub fn calculate_head_packing(n: i64, d: i64, partition_size: i64) -> (i64, i64, i64) {
        let mut group_size = 1;
        for g in 1..n + 1 {
            if n % g == 0 && g * d <= partition_size {
                group_size = g;
            }
        }
        (n / group_size, d * group_size, group_size)
    }
}
