use nki::prelude::*;

/// A `ReplicaGroup` parameter is the caller's `ncc.ReplicaGroup` itself: not
/// rings to wrap again, not a number or a list, with no dtypes, range or
/// literal default; and rings are not a group.
#[nki_kernel]
fn k(
    x: Hbm,
    group: ReplicaGroup,
    #[range(> 0)] ranged: ReplicaGroup,
    #[dtypes(float32)] typed: ReplicaGroup,
    #[default(4)] defaulted: ReplicaGroup,
) -> Hbm {
    let t = nl::ndarray([4, 8], x.dtype(), buffer = nl::sbuf);
    let u = nl::ndarray([4, 16], x.dtype(), buffer = nl::sbuf);
    ncc::all_gather([t], [u], ncc::ReplicaGroup(group), 1);
    ncc::all_gather([t], [u], [[0, 1]], 1);
    let n = group + 1;
    let m = group.len();
    x
}

fn main() {}
