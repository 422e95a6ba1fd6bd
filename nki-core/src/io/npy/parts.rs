//! Splitting `.npy` payloads into parts that threads read at their own file
//! offsets.
//!
//! Each part is a contiguous run of whole elements of one file; the parts of
//! all files being loaded form one queue that a few threads drain
//! ([`run_jobs`]). A thread reads its part with positioned reads (`pread`), so
//! the threads share no file offset and need no lock; the page-cache copies and
//! the page faults of the destination buffer, which dominate loading a large
//! file, then proceed in parallel. (Writing stays on one thread: buffered writes
//! to one file serialise on its inode lock.) Where positioned reads are missing
//! (non-Unix) each file is one part.

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

/// Runs `f` on every job — on up to `threads` scoped threads, each taking the
/// next job until none is left, when there are several — and returns each
/// job's result in job order.
pub(super) fn run_jobs<J: Send>(jobs: Vec<J>, threads: usize, f: impl Fn(J) -> Result<(), String> + Sync) -> Vec<Result<(), String>> {
    let workers = threads.clamp(1, jobs.len().max(1));
    if workers == 1 {
        return jobs.into_iter().map(f).collect();
    }
    let n = jobs.len();
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate());
    let mut results: Vec<Result<(), String>> = (0..n).map(|_| Err("a reading thread panicked".to_string())).collect();
    let done: Vec<Vec<(usize, Result<(), String>)>> = std::thread::scope(|s| {
        let (f, queue) = (&f, &queue);
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        // The lock is released at the end of this statement, before the job runs.
                        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some((i, job)) = next else { return done };
                        done.push((i, f(job)));
                    }
                })
            })
            .collect();
        // Join every thread before looking at the results, so none is left to the scope.
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    for (i, r) in done.into_iter().flatten() {
        results[i] = r;
    }
    results
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
    fn every_job_runs_once_and_results_come_in_job_order() {
        for threads in [0, 1, 2, 5, 40] {
            let mut items: Vec<usize> = vec![0; 10];
            let jobs: Vec<(usize, &mut [usize])> = items.chunks_mut(3).enumerate().map(|(i, c)| (i * 3, c)).collect();
            let results = run_jobs(jobs, threads, |(first, part)| {
                part.iter_mut().enumerate().for_each(|(i, x)| *x += first + i);
                if first >= 6 { Err(format!("part at {first}")) } else { Ok(()) }
            });
            assert_eq!(items, (0..10).collect::<Vec<_>>(), "{threads} threads");
            assert_eq!(results, [Ok(()), Ok(()), Err("part at 6".to_string()), Err("part at 9".to_string())]);
        }
        assert!(run_jobs(Vec::<()>::new(), 4, |_| Ok(())).is_empty());
    }
}
