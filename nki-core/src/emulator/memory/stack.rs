//! SBUF addresses for tiles without `address=`, as a stack allocator gives them.
//!
//! The NKI library's design specs recommend the stack allocator for every
//! kernel: allocations are made in the kernel's own scope, deterministic, and
//! freed when their scope closes (design-rmsnorm-quant, "SBUF/PSUM
//! Allocation"; the library's `SbufManager`: "Allocations within this scope are
//! freed when the scope closes", one buffer section unless a scope asks for
//! more). A tile declared in a loop body therefore gets back, in the next
//! iteration, the bytes the previous iteration's tile freed, and the compiler
//! makes the new tile's first write wait for the old tile's last access: on
//! hardware, consecutive iterations serialise on their shared buffers.
//!
//! Modelled as first fit: a tile takes the lowest bytes of each partition free
//! of every live tile when it is allocated and frees them when its handle is
//! dropped (in the DSL, at the end of the scope that declared it). A tile that
//! does not fit gets no address and stays a buffer of its own (the spill model
//! accounts for it).

/// The live byte ranges of a program's SBUF partitions.
#[derive(Default)]
pub(super) struct Stack {
    /// `(first byte, end byte, tile)`, sorted by first byte (held ranges may overlap).
    live: Vec<(usize, usize, usize)>,
}

impl Stack {
    /// The lowest byte offset at which `bytes` per partition are free below
    /// `cap`, taken for `tile`; `None` when no gap is large enough.
    pub(super) fn take(&mut self, tile: usize, bytes: usize, cap: usize) -> Option<usize> {
        let mut at = 0;
        let mut index = self.live.len();
        for (i, &(lo, hi, _)) in self.live.iter().enumerate() {
            if lo >= at + bytes {
                index = i;
                break;
            }
            at = at.max(hi);
        }
        if at + bytes > cap {
            return None;
        }
        self.live.insert(index, (at, at + bytes, tile));
        Some(at)
    }

    /// Marks bytes `lo..hi` held by `tile` (an explicitly placed tile), so no
    /// stacked tile is given them.
    pub(super) fn hold(&mut self, tile: usize, lo: usize, hi: usize) {
        let index = self.live.partition_point(|b| b.0 < lo);
        self.live.insert(index, (lo, hi, tile));
    }

    /// Frees the bytes `tile` holds.
    pub(super) fn release(&mut self, tile: usize) {
        self.live.retain(|b| b.2 != tile);
    }
}

#[cfg(test)]
mod tests {
    use super::Stack;

    #[test]
    fn a_freed_range_is_given_to_the_next_tile_that_fits() {
        let mut s = Stack::default();
        assert_eq!(s.take(0, 100, 1000), Some(0));
        assert_eq!(s.take(1, 200, 1000), Some(100));
        s.release(0);
        // The next iteration's tile of the same size gets the freed bytes back.
        assert_eq!(s.take(2, 100, 1000), Some(0));
        // A larger one goes past the live tiles.
        assert_eq!(s.take(3, 150, 1000), Some(300));
        assert_eq!(s.take(4, 600, 1000), None);
    }

    #[test]
    fn held_bytes_are_skipped() {
        let mut s = Stack::default();
        s.hold(0, 0, 64);
        assert_eq!(s.take(1, 32, 1000), Some(64));
    }
}
