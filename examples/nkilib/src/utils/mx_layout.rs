//! The OCP microscaling (MX, trn3) layout the library's MX kernels share:
//! four values per packed element, one `uint8` scale per 8 partitions x 4
//! values (32 values), and each group's scale kept in the SBUF quadrant its
//! 8 partitions sit in (group `g` at partition `32 (g / 4) + g % 4`).

pub use kernel::*;

/// The MX constants and the quadrant-placed scale load.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Values per packed element (`float8_e4m3fn_x4`, `float4_e2m1fn_x4`).
    pub const MX_PACK: i64 = 4;
    /// Partitions of one scale group.
    pub const MX_GROUP_PARTITIONS: i64 = 8;
    /// Values sharing one scale (8 partitions x 4 packed values).
    pub const SCALE_GROUP_SIZE: i64 = 32;
    /// Partitions of an SBUF quadrant; each holds the scales of its 4 groups.
    pub const QUADRANT: i64 = 32;
    /// Scale rows per quadrant: `QUADRANT / MX_GROUP_PARTITIONS`.
    pub const SCALES_PER_QUADRANT: i64 = 4;
    /// Quadrants of the partitions.
    pub const NUM_QUADRANTS: i64 = 4;

    /// The library's `load_mx_scales_strided`: the `groups` scale rows of
    /// `scales` (`[groups, F]`) into `scale_sb` (`[>= 32 (groups / 4), F]`),
    /// row `g` at partition `32 (g / 4) + g % 4`. The partitions between the
    /// quadrants' scale rows are zeroed first when the data spans more than
    /// one quadrant (a zero scale is `2^-127`: padded rows read it).
    #[nki_helper]
    pub fn load_mx_scales_strided(scale_sb: Sbuf, scales: Tensor, groups: i64) {
        if groups > SCALES_PER_QUADRANT {
            nisa::memset(scale_sb, 0.0);
        }
        for q in 0..groups.div_ceil(SCALES_PER_QUADRANT) {
            let (g0, p0) = (q * SCALES_PER_QUADRANT, q * QUADRANT);
            let n = (groups - g0).min(SCALES_PER_QUADRANT);
            nisa::dma_copy(scale_sb[s![p0..p0 + n, ..]], scales[s![g0..g0 + n, ..]]);
        }
    }
}
