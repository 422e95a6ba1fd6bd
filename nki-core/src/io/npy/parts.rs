//! Splitting a `.npy` payload into parts that threads read at their own file
//! offsets.
//!
//! Each part is a contiguous run of whole elements. A thread reads its part with
//! positioned reads (`pread`), so the threads share no file offset and need no
//! lock; the page-cache copies and the page faults of the destination buffer,
//! which dominate loading a large file, then proceed in parallel. (Writing stays
//! on one thread: buffered writes to one file serialise on its inode lock.)
//! Where positioned reads are missing (non-Unix) everything runs on one thread.

use std::fs::File;
use std::io;

/// Payload bytes per thread below which another thread costs more than it saves.
const MIN_BYTES_PER_PART: usize = 4 << 20;

/// How many parts a payload of `bytes` splits into with up to `threads` threads.
pub(super) fn count(bytes: usize, threads: usize) -> usize {
    if !cfg!(unix) {
        return 1;
    }
    (bytes / MIN_BYTES_PER_PART).clamp(1, threads.max(1))
}

/// Runs `f(first_element, part)` for each `per`-element part of `items` — on
/// scoped threads when there is more than one part — and returns the first
/// error in part order.
pub(super) fn run<T: Send>(items: &mut [T], per: usize, f: impl Fn(usize, &mut [T]) -> Result<(), String> + Sync) -> Result<(), String> {
    let per = per.max(1);
    if items.len() <= per {
        return f(0, items);
    }
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = items.chunks_mut(per).enumerate().map(|(i, part)| s.spawn(move || f(i * per, part))).collect();
        // Join every thread before looking at the results, so none is left to the scope.
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a reading thread panicked".into()))).collect();
        results.into_iter().collect()
    })
}

/// Reads exactly `buf.len()` bytes at `offset`.
#[cfg(unix)]
pub(super) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Reads exactly `buf.len()` bytes at `offset` (one thread only: seeks the shared offset).
#[cfg(not(unix))]
pub(super) fn read_at(mut file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_payloads_stay_on_one_thread_and_large_ones_use_the_budget() {
        assert_eq!(count(0, 8), 1);
        assert_eq!(count(MIN_BYTES_PER_PART - 1, 8), 1);
        assert_eq!(count(3 * MIN_BYTES_PER_PART, 0), 1);
        assert_eq!(count(3 * MIN_BYTES_PER_PART, 2), if cfg!(unix) { 2 } else { 1 });
        assert_eq!(count(3 * MIN_BYTES_PER_PART, 8), if cfg!(unix) { 3 } else { 1 });
    }

    #[test]
    fn every_element_is_visited_once_with_its_index_and_errors_come_in_order() {
        let mut items: Vec<usize> = vec![0; 10];
        run(&mut items, 3, |first, part| {
            part.iter_mut().enumerate().for_each(|(i, x)| *x = first + i);
            Ok(())
        })
        .unwrap();
        assert_eq!(items, (0..10).collect::<Vec<_>>());
        let e = run(&mut items, 3, |first, _| if first >= 3 { Err(format!("part at {first}")) } else { Ok(()) });
        assert_eq!(e, Err("part at 3".to_string()));
    }
}
