//! The ring plumbing the library's fine-grained collective kernels share
//! (`experimental/collectives/fgcc.py`): the replica groups of `num_groups`
//! rings of `tp_degree` consecutive ranks, and the one
//! `ncc.collective_permute_implicit` per ring step that moves every channel's
//! slice of a double buffer to the ring successor, for buffers in HBM and in
//! SBUF.

pub use kernel::*;

/// The body of the collectives' (and `bwmm_shard_on_block`'s) `*_config!`
/// macros: the call `shape` with the given fields over its defaults, a
/// compile error naming the first rule `violation` finds it breaks.
#[doc(hidden)]
#[macro_export]
macro_rules! __collective_config {
    ([$($shape:tt)+], [$($violation:tt)+], { $($default:ident: $default_value:expr),* $(,)? }, { $($field:ident = $value:expr),* }) => {{
        const CALL: $($shape)+ = $($shape)+ { $($field: $value,)* ..$($shape)+ { $($default: $default_value,)* } };
        const _: () = if let Some(rule) = $($violation)+(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The helpers, emitted as one module the kernels import.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// `num_groups` rings of `tp_degree` consecutive ranks: ring `g` holds
    /// ranks `g·tp_degree .. (g + 1)·tp_degree`, in that send order.
    #[nki_helper]
    pub fn generate_replica_groups(tp_degree: i64, num_groups: i64) -> Groups {
        (0..num_groups).map(|g| (0..tp_degree).map(|r| g * tp_degree + r).collect()).collect()
    }

    /// One ring step of HBM double buffers (`[M / RANK_N, K]`, seen as
    /// `[CHANNEL_N, LNC_N, local_M, K]`): channel `c` sends this program's
    /// `buf_src[c]` block to the successor's `buf_dst[c]`.
    #[nki_helper]
    pub fn launch_collective_permutes_hbm(buf_src: Hbm, buf_dst: Hbm, replica_group: Groups, channel_n: i64, lnc_n: i64) {
        let [rows, k] = buf_src.shape();
        let local_m = rows / channel_n / lnc_n;
        let src = buf_src.reshape([channel_n, lnc_n, local_m, k]);
        let dst = buf_dst.reshape([channel_n, lnc_n, local_m, k]);
        ncc::collective_permute_implicit(
            (0..channel_n).map(|c| [src[s![c, .., .., ..]]]).collect(),
            (0..channel_n).map(|c| [dst[s![c, .., .., ..]]]).collect(),
            ncc::ReplicaGroup(replica_group),
            channel_ids = (0..channel_n).map(|c| c).collect(),
        );
    }

    /// One ring step of flat SBUF double buffers (`[TILE_K, CHANNEL_N·width]`):
    /// channel `c` sends columns `c·width .. (c + 1)·width` of `buf_src` to the
    /// same columns of the successor's `buf_dst`.
    #[nki_helper]
    pub fn launch_collective_permutes_sbuf(buf_src: Sbuf, buf_dst: Sbuf, replica_group: Groups, channel_n: i64) {
        let width = buf_src.shape()[1] / channel_n;
        ncc::collective_permute_implicit(
            (0..channel_n).map(|c| [buf_src[s![.., c * width..(c + 1) * width]]]).collect(),
            (0..channel_n).map(|c| [buf_dst[s![.., c * width..(c + 1) * width]]]).collect(),
            ncc::ReplicaGroup(replica_group),
            channel_ids = (0..channel_n).map(|c| c).collect(),
        );
    }
}
