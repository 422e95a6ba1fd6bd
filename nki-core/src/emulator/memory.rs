//! SBUF / PSUM capacity accounting for one program.
//!
//! Every on-chip tensor takes a lease on its program's pool for its bytes per
//! partition; dropping the last handle of the tensor returns them. Allocation beyond
//! the generation's capacity is an error naming the tensor and the numbers.

use crate::hw::HwLimits;
use crate::{ErrorKind, NkiError, Result};
use std::sync::Arc;
use std::sync::Mutex;

/// On-chip memory kinds that are accounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnChip {
    /// State buffer.
    Sbuf,
    /// Matmul accumulation buffer.
    Psum,
}

#[derive(Default, Debug, Clone, Copy)]
struct Usage {
    sbuf: usize,
    psum: usize,
    sbuf_peak: usize,
    psum_peak: usize,
}

/// Peak on-chip bytes per partition a program used.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    /// Peak SBUF bytes per partition.
    pub sbuf_peak: usize,
    /// Peak PSUM bytes per partition.
    pub psum_peak: usize,
}

/// The per-program pool.
#[derive(Debug)]
pub struct MemPool {
    limits: HwLimits,
    usage: Mutex<Usage>,
}

/// Bytes held by one live on-chip tensor; returned on drop.
#[derive(Debug)]
pub struct Lease {
    pool: Arc<MemPool>,
    kind: OnChip,
    bytes: usize,
}

impl MemPool {
    /// An empty pool with the capacities of `limits`.
    pub fn new(limits: HwLimits) -> Arc<MemPool> {
        Arc::new(MemPool { limits, usage: Mutex::new(Usage::default()) })
    }

    /// Reserves `bytes` per partition of `kind` for the tensor `name`.
    pub fn acquire(self: &Arc<Self>, kind: OnChip, bytes: usize, name: &str) -> Result<Lease> {
        let mut u = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        let (used, cap, what) = match kind {
            OnChip::Sbuf => (u.sbuf, self.limits.sbuf_bytes_per_partition, "SBUF"),
            OnChip::Psum => (u.psum, self.limits.psum_bytes_per_partition(), "PSUM"),
        };
        if used + bytes > cap {
            return Err(NkiError::new(
                ErrorKind::Capacity,
                format!(
                    "{what} capacity exceeded: tensor '{name}' needs {bytes} B per partition, \
                     {used} B are in use and the capacity is {cap} B per partition"
                ),
            ));
        }
        match kind {
            OnChip::Sbuf => {
                u.sbuf += bytes;
                u.sbuf_peak = u.sbuf_peak.max(u.sbuf);
            }
            OnChip::Psum => {
                u.psum += bytes;
                u.psum_peak = u.psum_peak.max(u.psum);
            }
        }
        Ok(Lease { pool: Arc::clone(self), kind, bytes })
    }

    /// Peak usage so far.
    pub fn report(&self) -> MemoryReport {
        let u = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        MemoryReport { sbuf_peak: u.sbuf_peak, psum_peak: u.psum_peak }
    }

    /// Bytes per partition currently in use, `(sbuf, psum)`.
    pub fn in_use(&self) -> (usize, usize) {
        let u = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        (u.sbuf, u.psum)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut u = self.pool.usage.lock().unwrap_or_else(|e| e.into_inner());
        match self.kind {
            OnChip::Sbuf => u.sbuf -= self.bytes,
            OnChip::Psum => u.psum -= self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Generation;

    #[test]
    fn leases_return_bytes_and_capacity_is_enforced() {
        let pool = MemPool::new(Generation::Trn2.limits());
        let a = pool.acquire(OnChip::Psum, 8 * 1024, "a").unwrap();
        let b = pool.acquire(OnChip::Psum, 8 * 1024, "b").unwrap();
        let err = pool.acquire(OnChip::Psum, 4, "c").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Capacity);
        assert!(err.message.contains("'c'") && err.message.contains("16384"), "{err}");
        drop(a);
        assert_eq!(pool.in_use(), (0, 8 * 1024));
        drop(b);
        assert_eq!(pool.report().psum_peak, 16 * 1024);
    }
}
