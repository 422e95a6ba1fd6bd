//! The `nki` binary's memory: the system allocator, with large blocks backed by
//! transparent huge pages and the heaps of worker threads grown in large steps.
//!
//! An emulator run touches tens of megabytes of fresh memory: the inputs read
//! from `.npy` files, every tile and output, the buffers of the matmul
//! kernels. With 4 KiB pages each first touch of a page is a fault (tens of
//! thousands per run; in a virtual machine each is expensive), and faults in
//! the serial parts of a run — loading the inputs, writing the outputs, tearing
//! the process down — do not shrink with more cores. Blocks of at least
//! [`HUGE_PAGE`] bytes are therefore aligned to a huge page and advised with
//! `MADV_HUGEPAGE`, so the kernel backs them with 2 MiB pages where it can (one
//! fault instead of 512) when transparent huge pages are enabled in `madvise`
//! or `always` mode. The advice is a hint: where it is refused or huge pages are
//! off, the memory is ordinary memory.
//!
//! The threads of the LNC programs and ranks allocate from their own glibc
//! arenas, whose heaps grow by `mprotect` in small steps; in a process whose
//! other threads are busy each step is costly (it changes the shared address
//! space). [`tune_heaps`] makes every growth step at least [`HEAP_STEP`].
//! Other platforms use the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// The size of an x86-64 / AArch64 transparent huge page, and the smallest
/// block advised to use them.
pub const HUGE_PAGE: usize = 2 << 20;

/// Extra bytes a heap grows by whenever it must grow (glibc's `M_TOP_PAD`).
pub const HEAP_STEP: usize = 64 << 20;

/// Sets the allocator's heap growth step to [`HEAP_STEP`] (glibc on Linux; a
/// no-op elsewhere). Call before starting threads.
pub fn tune_heaps() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes a tuning parameter; a refusal (0) leaves the default.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, HEAP_STEP as libc::c_int);
    }
}

/// The system allocator with large blocks on huge pages (see the module docs).
pub struct HugePageAlloc;

impl HugePageAlloc {
    /// The layout a block of `layout` is allocated with: huge-page aligned when
    /// it is large enough to hold one.
    fn actual(layout: Layout) -> Layout {
        if layout.size() >= HUGE_PAGE && cfg!(target_os = "linux") { layout.align_to(HUGE_PAGE).unwrap_or(layout) } else { layout }
    }

    /// Advises the kernel to back the whole huge pages of a fresh block with huge pages.
    fn advise(ptr: *mut u8, layout: Layout) {
        #[cfg(target_os = "linux")]
        if !ptr.is_null() && layout.align() >= HUGE_PAGE {
            let len = layout.size() / HUGE_PAGE * HUGE_PAGE;
            // SAFETY: `ptr..ptr + len` lies inside the block just allocated;
            // MADV_HUGEPAGE changes no contents, and its failure is harmless.
            unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) };
        }
    }
}

// SAFETY: every block comes from `System` with the layout `actual` derives from
// the caller's, which is at least as large and as aligned; `dealloc` and
// `realloc` derive the same layout from the caller's to return it.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let actual = Self::actual(layout);
        // SAFETY: `actual` has the caller's non-zero size.
        let ptr = unsafe { System.alloc(actual) };
        Self::advise(ptr, actual);
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let actual = Self::actual(layout);
        // SAFETY: as in `alloc`.
        let ptr = unsafe { System.alloc_zeroed(actual) };
        Self::advise(ptr, actual);
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `actual(layout)`.
        unsafe { System.dealloc(ptr, Self::actual(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = Self::actual(layout);
        // SAFETY: the caller guarantees `new_size` is non-zero and fits `isize`
        // with `layout`'s alignment.
        let new = Self::actual(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) });
        if old.align() == new.align() {
            // SAFETY: `ptr` was allocated by `System` with `old`, which has `new`'s alignment.
            let grown = unsafe { System.realloc(ptr, old, new.size()) };
            if grown != ptr {
                Self::advise(grown, new);
            }
            return grown;
        }
        // The block crosses the huge-page size: move it to a block of the new alignment.
        // SAFETY: `new` has a non-zero size.
        let moved = unsafe { self.alloc(new) };
        if !moved.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size)) };
            // SAFETY: as in `dealloc`.
            unsafe { System.dealloc(ptr, old) };
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_huge_page_aligned_and_keep_their_contents_across_reallocation() {
        let a = HugePageAlloc;
        for (from, to) in [(64, 3 * HUGE_PAGE), (3 * HUGE_PAGE, 5 * HUGE_PAGE), (5 * HUGE_PAGE, 100), (100, 200)] {
            let layout = Layout::from_size_align(from, 8).unwrap();
            // SAFETY: non-zero sizes; each block is freed with the layout it has.
            unsafe {
                let p = a.alloc(layout);
                assert!(!p.is_null());
                if from >= HUGE_PAGE && cfg!(target_os = "linux") {
                    assert_eq!(p as usize % HUGE_PAGE, 0, "{from} bytes");
                }
                (0..from.min(to)).for_each(|i| *p.add(i) = (i % 251) as u8);
                let q = a.realloc(p, layout, to);
                assert!(!q.is_null());
                assert!((0..from.min(to)).all(|i| *q.add(i) == (i % 251) as u8), "{from} -> {to}");
                if to >= HUGE_PAGE && cfg!(target_os = "linux") {
                    assert_eq!(q as usize % HUGE_PAGE, 0, "{from} -> {to}");
                }
                a.dealloc(q, Layout::from_size_align(to, 8).unwrap());
                let z = a.alloc_zeroed(Layout::from_size_align(to, 8).unwrap());
                assert!((0..to).step_by(4096).all(|i| *z.add(i) == 0));
                a.dealloc(z, Layout::from_size_align(to, 8).unwrap());
            }
        }
    }
}
