//! What the float, `STATIC` and MX forms of `output_projection_cte` share
//! (the library's `output_projection_cte_parameters`): the sequence tile,
//! the weight blocks the SBUF budget allows and the static scales.

pub use kernel::*;

/// The tile constants, the weight-block size and the static scales.
#[nki::nki_module]
pub mod kernel {
    pub use crate::output_projection::output_projection_utils::{F_MAX, QUANT_DTYPE};
    use nki::prelude::*;

    /// Sequence positions loaded per attention tile.
    pub const S_TILE_SIZE: i64 = 512;
    /// The SBUF bytes a weight block may take (10 MiB).
    pub const MAX_WEIGHT_SBUF_BYTES: i64 = 10485760;
    /// An unblocked program share is rounded up to a multiple of this.
    pub const H_ALIGNMENT: i64 = 16;

    /// The bytes of one weight element (a packed MX element holds four values).
    #[nki_helper]
    pub fn dtype_size(dtype: Dtype) -> i64 {
        if dtype == nl::float32 || dtype == nl::float8_e4m3fn_x4 {
            return 4;
        }
        if dtype == QUANT_DTYPE || dtype == nl::float8_e4m3fn {
            return 1;
        }
        2
    }

    /// The library's `load_static_quant_input_scales`,
    /// `load_static_quant_weight_scales` and `invert_static_quant_scales`
    /// (`STATIC` and `STATIC_MX`): the `[128, 1]` fp32 scales into
    /// `inv_input_scale_sb` as `1 / input_scale` and `weight_scale_sb` as
    /// `weight_scale · input_scale`.
    #[nki_helper]
    pub fn load_static_quant_scales(inv_input_scale_sb: Sbuf, weight_scale_sb: Sbuf, input_scales: Hbm, weight_scales: Hbm) {
        nisa::dma_copy(inv_input_scale_sb, input_scales);
        nisa::dma_copy(weight_scale_sb, weight_scales);
        nisa::activation(weight_scale_sb, nl::copy, weight_scale_sb, scale = inv_input_scale_sb);
        nisa::reciprocal(inv_input_scale_sb, inv_input_scale_sb);
    }

    /// The library's `_calculate_h_block_size`: the program's `h_sharded_size`
    /// columns in one block (rounded up to `H_ALIGNMENT`) when `rows` weight
    /// rows of `elem_bytes` each fit in `MAX_WEIGHT_SBUF_BYTES`, else the most
    /// `F_MAX` multiples that fit (at least one).
    #[nki_helper]
    pub fn calculate_h_block_size(rows: i64, h_sharded_size: i64, elem_bytes: i64) -> i64 {
        let bytes_per_column = rows * elem_bytes;
        let aligned = h_sharded_size.div_ceil(H_ALIGNMENT) * H_ALIGNMENT;
        let fits = aligned * bytes_per_column <= MAX_WEIGHT_SBUF_BYTES;
        let most = (MAX_WEIGHT_SBUF_BYTES / bytes_per_column / F_MAX * F_MAX).max(F_MAX);
        let blocked = (most.min(h_sharded_size) / F_MAX * F_MAX).max(F_MAX);
        let h_block_size = if fits { aligned } else { blocked };
        h_block_size
    }

    /// Weight block `hb` of program `prg_id`: its first column and its
    /// columns (the last block of a share may be short).
    #[nki_helper]
    pub fn h_block_bounds(prg_id: i64, h_sharded_size: i64, h_block_size: i64, hb: i64) -> (i64, i64) {
        let c0 = hb * h_block_size;
        (prg_id * h_sharded_size + c0, (h_sharded_size - c0).min(h_block_size))
    }
}
