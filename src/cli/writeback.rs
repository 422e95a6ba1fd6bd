//! A file writer that starts writing its data back to disk as it goes.
//!
//! The command's outputs are flushed to disk before they are renamed into place
//! (see [`output_plan`](super::output_plan)). Flushing only at the end leaves the
//! whole file to the final `fsync`, which then waits for all of it. On Linux this
//! writer asks the kernel to start writeback of each [`WRITEBACK_BYTES`] run as
//! soon as it is written (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`, which
//! does not wait), so the disk works while the rest is encoded and the final
//! `fsync` finds little left to do. Elsewhere it is a plain file writer.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two writeback requests.
pub const WRITEBACK_BYTES: u64 = 1 << 20;

/// Writes to a file, starting writeback of every [`WRITEBACK_BYTES`] written.
pub struct EarlyWriteback<'a> {
    file: &'a File,
    /// Bytes written so far.
    written: u64,
    /// Bytes whose writeback has been requested.
    requested: u64,
}

impl<'a> EarlyWriteback<'a> {
    /// A writer appending to `file` from its current position, taken as offset 0.
    pub fn new(file: &'a File) -> Self {
        EarlyWriteback { file, written: 0, requested: 0 }
    }

    /// Requests writeback of what was written since the last request.
    fn request(&mut self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (start, len) = (self.requested, self.written - self.requested);
            if let (Ok(start), Ok(len)) = (i64::try_from(start), i64::try_from(len)) {
                // SAFETY: a plain system call on an open descriptor; it only
                // schedules I/O, and a failure merely leaves the work to `fsync`.
                unsafe { libc::sync_file_range(self.file.as_raw_fd(), start, len, libc::SYNC_FILE_RANGE_WRITE) };
            }
        }
        self.requested = self.written;
    }
}

impl Write for EarlyWriteback<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.requested >= WRITEBACK_BYTES {
            self.request();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn writes_every_byte_in_order_across_writeback_requests() {
        let path = std::env::temp_dir().join(format!("nki-writeback-{}", std::process::id()));
        let data: Vec<u8> = (0..3 * WRITEBACK_BYTES as usize + 12345).map(|i| (i % 251) as u8).collect();
        {
            let file = File::create(&path).unwrap();
            let mut w = EarlyWriteback::new(&file);
            for part in data.chunks(70_000) {
                w.write_all(part).unwrap();
            }
            w.flush().unwrap();
            assert_eq!(w.written, data.len() as u64);
            // Every full run was handed to writeback; less than one run is left to `fsync`.
            assert!(w.requested >= 3 * WRITEBACK_BYTES && w.written - w.requested < WRITEBACK_BYTES, "{} of {}", w.requested, w.written);
        }
        let mut back = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(back == data);
    }
}
