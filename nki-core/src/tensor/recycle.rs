//! Reuse of large cell buffers within a thread.
//!
//! Kernels allocate the same big tiles over and over (a score tile per query
//! group, an output per ring step). A fresh multi-megabyte `Vec` comes from new
//! pages that the OS must fault in and zero before the emulator fills them with
//! NaN; handing a dropped buffer to the next allocation of similar size skips
//! that work. Each thread keeps at most [`CAP_BYTES`] of spare buffers.

use std::cell::RefCell;

/// Buffers smaller than this (in cells) are left to the allocator.
const MIN_CELLS: usize = 16 * 1024;
/// Spare bytes a thread may hold.
const CAP_BYTES: usize = 64 << 20;

thread_local! {
    static SPARE: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// A spare buffer of this thread whose capacity is between `n` and `2n`, emptied.
fn spare(n: usize) -> Option<Vec<f32>> {
    if n < MIN_CELLS {
        return None;
    }
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        let best =
            s.iter().enumerate().filter(|(_, v)| (n..=2 * n).contains(&v.capacity())).min_by_key(|(_, v)| v.capacity()).map(|(i, _)| i);
        best.map(|i| {
            let mut v = s.swap_remove(i);
            v.clear();
            v
        })
    })
}

/// `n` cells set to `value`, in a spare buffer when there is one.
pub(crate) fn filled(n: usize, value: f32) -> Vec<f32> {
    match spare(n) {
        Some(mut v) => {
            v.resize(n, value);
            v
        }
        None => vec![value; n],
    }
}

/// An empty buffer with room for `n` cells, a spare one when there is one.
pub(crate) fn take(n: usize) -> Vec<f32> {
    spare(n).unwrap_or_else(|| Vec::with_capacity(n))
}

/// Keeps `v` for a later [`filled`] or [`take`] on this thread, if it is large and there is room.
pub(crate) fn give_back(v: Vec<f32>) {
    if v.capacity() < MIN_CELLS {
        return;
    }
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        let held: usize = s.iter().map(|b| b.capacity() * 4).sum();
        if held + v.capacity() * 4 <= CAP_BYTES {
            s.push(v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_serves_the_next_allocation_of_similar_size() {
        let mut v = filled(MIN_CELLS * 2, 1.0);
        v[0] = 5.0;
        let ptr = v.as_ptr();
        give_back(v);
        let w = filled(MIN_CELLS * 2 - 7, f32::NAN);
        assert_eq!(w.as_ptr(), ptr, "the spare buffer is reused");
        assert_eq!(w.len(), MIN_CELLS * 2 - 7);
        assert!(w.iter().all(|x| x.is_nan()), "reused cells are refilled");
        // Far smaller requests do not take a big buffer.
        let big = filled(MIN_CELLS * 8, 0.0);
        let big_ptr = big.as_ptr();
        give_back(big);
        let small = filled(MIN_CELLS, 0.0);
        assert!(small.as_ptr() != big_ptr);
    }
}
