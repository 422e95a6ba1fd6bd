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
use std::mem::MaybeUninit;

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

/// Reads exactly `buf.len()` bytes at `offset` into memory that need not be
/// initialised: the file's bytes go straight to their destination, with no
/// intermediate buffer and no zeroing pass.
#[cfg(unix)]
pub(super) fn read_uninit_at(file: &File, buf: &mut [MaybeUninit<u8>], offset: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        let at = offset
            .checked_add(done as u64)
            .and_then(|at| libc::off_t::try_from(at).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "file offset out of range"))?;
        // SAFETY: the kernel writes at most `rest.len()` bytes to `rest`, memory
        // this function borrows exclusively; it never reads it.
        let n = unsafe { libc::pread(file.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len(), at) };
        match usize::try_from(n) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset` into memory that need not be
/// initialised (zeroed first here: without `pread` the bytes pass through a slice).
#[cfg(not(unix))]
pub(super) fn read_uninit_at(file: &File, buf: &mut [MaybeUninit<u8>], offset: u64) -> io::Result<()> {
    buf.fill(MaybeUninit::new(0));
    // SAFETY: every byte was just initialised.
    let bytes = unsafe { &mut *(buf as *mut [MaybeUninit<u8>] as *mut [u8]) };
    read_at(file, bytes, offset)
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
    fn uninitialised_reads_take_the_bytes_at_the_offset_and_refuse_to_run_past_the_end() {
        let path = std::env::temp_dir().join(format!("nki-parts-{}", std::process::id()));
        std::fs::write(&path, (0..100u8).collect::<Vec<_>>()).unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = [MaybeUninit::<u8>::uninit(); 10];
        read_uninit_at(&file, &mut buf, 90).unwrap();
        // SAFETY: the read returned Ok, so every byte was written.
        assert_eq!(buf.map(|b| unsafe { b.assume_init() }), std::array::from_fn(|i| 90 + i as u8));
        let e = read_uninit_at(&file, &mut buf, 95).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        std::fs::remove_file(path).unwrap();
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
