//! The OCP microscaling (MX) layout of NeuronCore-v4 (`quantize_mx`,
//! `nc_matmul_mx`): scale groups of 8 partitions x 4 elements, and the
//! placement of their scales in the SBUF quadrant each group comes from.

/// Partitions of one scale group.
pub const GROUP_PARTITIONS: usize = 8;
/// Elements per partition of one scale group (the elements of one packed value).
pub const GROUP_ELEMENTS: usize = 4;
/// Partitions of an SBUF quadrant; MX operands have a multiple of them.
pub const QUADRANT: usize = 32;
/// Scale rows a quadrant holds: one per 8 of its 32 partitions.
pub const QUADRANT_SCALES: usize = QUADRANT / GROUP_PARTITIONS;
/// The offsets within a quadrant at which a scale tile may start (scales of
/// up to four tensors packed into one tile).
pub const SCALE_OFFSETS: [usize; 4] = [0, 4, 8, 12];

/// The scale-tile row of group `g`: row `g % 4` of the group's quadrant.
pub const fn scale_row(g: usize) -> usize {
    g / QUADRANT_SCALES * QUADRANT + g % QUADRANT_SCALES
}

/// The partitions a scale tile of `groups` groups must span (`groups` when
/// they fit one quadrant, `32 (q - 1) + 4` for `q` full quadrants).
pub const fn scale_partitions(groups: usize) -> usize {
    if groups == 0 { 0 } else { scale_row(groups - 1) + 1 }
}
