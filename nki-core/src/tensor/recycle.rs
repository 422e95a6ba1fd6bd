//! Reuse of large cell buffers.
//!
//! Kernels allocate the same big tiles over and over (a score tile per query
//! group, an output per ring step). A fresh multi-megabyte `Vec` comes from new
//! pages that the OS must fault in and zero; handing a dropped buffer to the
//! next allocation of similar size skips that work, and an on-chip tile takes
//! it as it was left ([`leftover`]), with no fill at all. The spare buffers
//! are one pool for the whole process, held to [`CAP_BYTES`]: a launch of `W`
//! ranks runs `W` threads, and a cap per thread would let spares alone grow to
//! `W` times it.

use std::sync::Mutex;

/// Buffers smaller than this (in cells) are left to the allocator.
const MIN_CELLS: usize = 16 * 1024;
/// Spare bytes the process may hold.
const CAP_BYTES: usize = 64 << 20;

/// The spare buffers and their bytes.
struct Spares {
    bufs: Vec<Vec<f32>>,
    bytes: usize,
}

impl Spares {
    /// A spare buffer whose capacity is between `n` and `2n`, emptied.
    fn take(&mut self, n: usize) -> Option<Vec<f32>> {
        let mut v = self.take_as_left(n)?;
        v.clear();
        Some(v)
    }

    /// A spare buffer whose capacity is between `n` and `2n`, its cells as they were.
    fn take_as_left(&mut self, n: usize) -> Option<Vec<f32>> {
        if n < MIN_CELLS {
            return None;
        }
        let fits = |v: &Vec<f32>| (n..=2 * n).contains(&v.capacity());
        let best = self.bufs.iter().enumerate().filter(|(_, v)| fits(v)).min_by_key(|(_, v)| v.capacity()).map(|(i, _)| i)?;
        let v = self.bufs.swap_remove(best);
        self.bytes -= v.capacity() * 4;
        Some(v)
    }

    /// Keeps `v` if it is large and there is room.
    fn keep(&mut self, v: Vec<f32>) {
        let bytes = v.capacity() * 4;
        if v.capacity() >= MIN_CELLS && self.bytes + bytes <= CAP_BYTES {
            self.bytes += bytes;
            self.bufs.push(v);
        }
    }
}

static SPARE: Mutex<Spares> = Mutex::new(Spares { bufs: Vec::new(), bytes: 0 });

fn spares() -> std::sync::MutexGuard<'static, Spares> {
    // The pool holds plain buffers: one a panicking thread left behind is still whole.
    SPARE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `n` cells set to `value`, in a spare buffer when there is one.
pub(crate) fn filled(n: usize, value: f32) -> Vec<f32> {
    match take_spare(n) {
        Some(mut v) => {
            v.resize(n, value);
            v
        }
        None => vec![value; n],
    }
}

/// `n` cells of a spare buffer as its last user left them (cells past that
/// user's length are zero), when there is one: for an allocation whose
/// unwritten cells are zeroed only where something reads or partly writes them
/// ([`super::unwritten`]), so a tile the kernel overwrites is never filled.
pub(crate) fn leftover(n: usize) -> Option<Vec<f32>> {
    if poisoned() {
        return Some(vec![f32::NAN; n]);
    }
    if n < MIN_CELLS {
        return None;
    }
    let mut v = spares().take_as_left(n)?;
    if v.len() >= n {
        v.truncate(n);
    } else {
        v.resize(n, 0.0);
    }
    Some(v)
}

/// The variable that makes every [`leftover`] buffer NaN, whatever its size: a
/// self-check of the emulator. Results are the same with it set; an
/// instruction that saw a cell nothing wrote without having it zeroed first
/// would turn NaN (`.ci/test` runs the kernel suites under it).
pub const POISON_TILES_ENV: &str = "NKI_POISON_TILES";

/// Whether [`POISON_TILES_ENV`] is set (read once).
fn poisoned() -> bool {
    static POISONED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *POISONED.get_or_init(|| std::env::var_os(POISON_TILES_ENV).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// An empty buffer with room for `n` cells, a spare one when there is one.
pub(crate) fn take(n: usize) -> Vec<f32> {
    take_spare(n).unwrap_or_else(|| Vec::with_capacity(n))
}

fn take_spare(n: usize) -> Option<Vec<f32>> {
    // Small requests never lock the pool.
    if n < MIN_CELLS { None } else { spares().take(n) }
}

/// Keeps `v` for a later [`filled`] or [`take`], if it is large and there is room.
pub(crate) fn give_back(v: Vec<f32>) {
    if v.capacity() >= MIN_CELLS {
        spares().keep(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Spares {
        Spares { bufs: Vec::new(), bytes: 0 }
    }

    #[test]
    fn a_kept_buffer_serves_the_next_request_of_similar_size() {
        let mut pool = empty();
        let v = vec![5.0f32; MIN_CELLS * 2];
        let ptr = v.as_ptr();
        pool.keep(v);
        let w = pool.take(MIN_CELLS * 2 - 7).expect("the spare buffer is reused");
        assert_eq!((w.as_ptr(), w.len(), pool.bytes), (ptr, 0, 0), "handed back emptied, and no longer counted");
        // Far smaller requests do not take a big buffer.
        pool.keep(vec![0.0; MIN_CELLS * 8]);
        assert!(pool.take(MIN_CELLS).is_none());
    }

    #[test]
    fn the_pool_holds_at_most_its_cap() {
        let mut pool = empty();
        let cells = CAP_BYTES / 4 / 3;
        for _ in 0..8 {
            pool.keep(vec![0.0; cells]);
        }
        assert_eq!(pool.bufs.len(), 3);
        assert!(pool.bytes <= CAP_BYTES && pool.bytes == pool.bufs.iter().map(|b| b.capacity() * 4).sum::<usize>());
    }

    #[test]
    fn filled_cells_are_refilled_whatever_buffer_serves_them() {
        let v = filled(MIN_CELLS * 2, 1.0);
        give_back(v);
        let w = filled(MIN_CELLS * 2 - 7, f32::NAN);
        assert_eq!(w.len(), MIN_CELLS * 2 - 7);
        assert!(w.iter().all(|x| x.is_nan()));
    }
}
