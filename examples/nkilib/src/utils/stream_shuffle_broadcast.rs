//! The library's `stream_shuffle_broadcast` (`core/utils/stream_shuffle_broadcast.py`):
//! the first partition of an SBUF tile copied onto every partition of
//! another by `nc_stream_shuffle`, one 32-partition quadrant at a time.

pub use kernel::*;

/// The helper.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Partitions one `nc_stream_shuffle` moves: a quadrant.
    pub const SHUFFLE_QUADRANT: i64 = 32;

    /// Copies partition 0 of the 2-D SBUF tile `src` onto every partition of
    /// the 2-D SBUF tile `dst` (as wide as `src`): each quadrant of `dst`
    /// takes it through a shuffle mask of zeros.
    #[nki_helper]
    pub fn stream_shuffle_broadcast(src: Sbuf, dst: Sbuf) {
        let [dst_npar, width] = dst.shape();
        let [_, src_width] = src.shape();
        assert!(src_width == width, "stream_shuffle_broadcast: src and dst must have matching final dimension");
        let shuffle_mask: Vec<i64> = (0..SHUFFLE_QUADRANT).map(|_| 0).collect();
        for i in 0..dst_npar.div_ceil(SHUFFLE_QUADRANT) {
            let cur_npar = SHUFFLE_QUADRANT.min(dst_npar - i * SHUFFLE_QUADRANT);
            let first = i * SHUFFLE_QUADRANT;
            nisa::nc_stream_shuffle(dst[s![first..first + cur_npar, 0..width]], src[s![0..1, ..]], shuffle_mask);
        }
    }
}
