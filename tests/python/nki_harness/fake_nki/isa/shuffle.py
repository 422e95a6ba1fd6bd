"""`nc_stream_shuffle`: cross-partition moves inside 32-partition quadrants."""

from ..errors import NkiError
from ..runtime import instruction
from ..tile import Tile


@instruction
def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """Within each 32-partition quadrant, dst lane i receives src lane
    `shuffle_mask[i]` (255 leaves the lane unchanged); a bit-exact move between
    tiles of one dtype and free size, relative to each tile's first partition."""
    op = "nisa.nc_stream_shuffle"
    s, d = Tile(op, "src", src), Tile(op, "dst", dst)
    if src.dtype is not dst.dtype or s.nf != d.nf:
        raise NkiError(op, f"src {src.describe()} and dst {dst.describe()} must have the same dtype and elements per "
                           "partition")
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != 32 or any(not 0 <= m < 32 and m != 255 for m in mask):
        raise NkiError(op, f"shuffle_mask must hold 32 lane indices in 0..32 or 255, got {mask}")
    active = -(-max(s.np, d.np) // 32) * 32
    allowed = [0] if active in (96, 128) else [0, 64] if active == 64 else [0, 32, 64, 96]
    for role, start in (("src", s.p0), ("dst", d.p0)):
        if start not in allowed:
            raise NkiError(op, f"{role} starts at partition {start}; with {active} active partitions the start must "
                               f"be one of {allowed}")
    vals, out = s.read_raw(), d.read_kept()
    for r in range(d.np):
        if mask[r % 32] == 255:
            continue
        src_row = r // 32 * 32 + mask[r % 32]
        if src_row >= s.np:
            raise NkiError(op, f"dst lane {r} reads src lane {src_row}, but src {src.describe()} has {s.np} "
                               "partitions")
        out[r] = vals[src_row]
    d.write_raw(out)
