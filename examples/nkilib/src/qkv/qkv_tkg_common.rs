//! What the two forms of `qkv_tkg` share: the tile constants, the call's
//! dimensions and the LNC2 exchange of partial outputs. Both `qkv_tkg` and
//! `qkv_tkg_mx_impl` import it (the MX form cannot import from `qkv_tkg`,
//! which dispatches to it).

use nki::prelude::*;

pub use kernel::*;

/// The shared constants, dimension bundle and helpers.
#[nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Partitions: the hidden dim (or its packed rows) is laid on them.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// PSUM banks: one I block holds one bank per I tile.
    pub const NUM_PSUM_BANKS: i64 = 8;
    /// Output columns per matmul (one fp32 PSUM bank).
    pub const I_TILE_SIZE: i64 = 512;
    /// Output columns per I block: every PSUM bank.
    pub const I_BLOCK_SIZE: i64 = 4096;
    /// The DMA queue the LNC2 partial outputs are exchanged over.
    pub const PIPE_ID: i64 = 0;

    /// The dimensions of a `[B, S, H]` input projected to `I` columns.
    #[nki_object]
    pub struct QkvTkgDims {
        /// Batch.
        pub b: i64,
        /// Sequence length.
        pub s: i64,
        /// `B · S`: the token rows.
        pub bxs: i64,
        /// Hidden size.
        pub h: i64,
        /// Fused QKV width `(num_q_heads + 2·num_kv_heads)·d_head`.
        pub i: i64,
    }

    /// The dimensions of `hidden` `[B, S, H]` and weights `[.., I]`.
    #[nki_helper]
    pub fn qkv_tkg_dims(hidden: Hbm, qkv_w: Hbm) -> QkvTkgDims {
        let [b, s, h] = hidden.shape();
        QkvTkgDims { b, s, bxs: b * s, h, i: qkv_w.shape()[1] }
    }

    /// With two programs sharing the hidden dim, adds the other program's
    /// partial output to `out_sb` (both programs end with the full sum).
    #[nki_helper]
    pub fn sum_lnc_partials(out_sb: Sbuf, num_shards: i64, shard_id: i64) {
        if num_shards > 1 {
            let recv = nl::ndarray(out_sb.shape(), out_sb.dtype(), buffer = nl::sbuf);
            let other = 1 - shard_id;
            nisa::sendrecv(out_sb, recv, other, other, PIPE_ID);
            nisa::tensor_tensor(out_sb, out_sb, recv, nl::add);
        }
    }
}
