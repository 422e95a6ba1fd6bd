//! SBUF / PSUM capacity accounting for one program.
//!
//! Every on-chip tensor takes a lease on its program's pool; dropping the last
//! handle of the tensor returns it. SBUF is leased by bytes per partition. PSUM is
//! leased by whole banks: NKI places each PSUM tensor at a bank boundary, so a
//! tensor of `b` bytes per partition holds `ceil(b / bank bytes)` banks and no two
//! tensors share a bank. Banks are counted, not placed (the compiler chooses which
//! banks; the count is what can run out). Allocation beyond the generation's
//! capacity is an error naming the tensor and the numbers.

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

/// A live PSUM tensor: its lease id, name and banks.
#[derive(Debug)]
struct PsumTenant {
    id: u64,
    name: String,
    banks: usize,
}

#[derive(Default, Debug)]
struct Usage {
    sbuf: usize,
    sbuf_peak: usize,
    psum: Vec<PsumTenant>,
    psum_peak_banks: usize,
    next_id: u64,
}

impl Usage {
    /// PSUM banks held now.
    fn psum_banks(&self) -> usize {
        self.psum.iter().map(|t| t.banks).sum()
    }
}

/// Peak on-chip usage of a program (per partition).
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    /// Peak SBUF bytes per partition.
    pub sbuf_peak: usize,
    /// Peak number of PSUM banks held at once.
    pub psum_peak_banks: usize,
    /// The bytes per partition those banks span (`psum_peak_banks` × bank bytes).
    pub psum_peak_bytes: usize,
}

/// The per-program pool.
#[derive(Debug)]
pub struct MemPool {
    limits: HwLimits,
    usage: Mutex<Usage>,
}

/// What one live on-chip tensor holds (SBUF bytes or PSUM banks); returned on drop.
#[derive(Debug)]
pub struct Lease {
    pool: Arc<MemPool>,
    kind: OnChip,
    /// SBUF bytes per partition, or PSUM banks.
    amount: usize,
    id: u64,
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl MemPool {
    /// An empty pool with the capacities of `limits`.
    pub fn new(limits: HwLimits) -> Arc<MemPool> {
        Arc::new(MemPool { limits, usage: Mutex::new(Usage::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves room for the tensor `name` of `bytes` per partition: the bytes in
    /// SBUF, the whole banks they round up to in PSUM.
    pub fn acquire(self: &Arc<Self>, kind: OnChip, bytes: usize, name: &str) -> Result<Lease> {
        let mut u = self.lock();
        let id = u.next_id;
        u.next_id += 1;
        let amount = match kind {
            OnChip::Sbuf => {
                let (used, cap) = (u.sbuf, self.limits.sbuf_bytes_per_partition);
                if used + bytes > cap {
                    return Err(NkiError::new(
                        ErrorKind::Capacity,
                        format!(
                            "SBUF capacity exceeded: tensor '{name}' needs {bytes} B per partition, \
                             {used} B are in use and the capacity is {cap} B per partition"
                        ),
                    ));
                }
                u.sbuf += bytes;
                u.sbuf_peak = u.sbuf_peak.max(u.sbuf);
                bytes
            }
            OnChip::Psum => {
                let (need, total) = (self.limits.psum_banks_for(bytes), self.limits.psum_banks);
                let used = u.psum_banks();
                if used + need > total {
                    let tenants: Vec<String> = u.psum.iter().map(|t| format!("'{}' ({})", t.name, plural(t.banks, "bank"))).collect();
                    let held = if tenants.is_empty() { String::new() } else { format!(": {}", tenants.join(", ")) };
                    return Err(NkiError::new(
                        ErrorKind::Capacity,
                        format!(
                            "PSUM capacity exceeded: tensor '{name}' needs {} ({bytes} B per partition; every PSUM tensor \
                             takes whole banks of {} B), but {} of the {total} banks are in use{held}",
                            plural(need, "bank"),
                            self.limits.psum_bank_bytes,
                            used,
                        ),
                    ));
                }
                u.psum.push(PsumTenant { id, name: name.to_string(), banks: need });
                u.psum_peak_banks = u.psum_peak_banks.max(used + need);
                need
            }
        };
        Ok(Lease { pool: Arc::clone(self), kind, amount, id })
    }

    /// Peak usage so far.
    pub fn report(&self) -> MemoryReport {
        let u = self.lock();
        MemoryReport {
            sbuf_peak: u.sbuf_peak,
            psum_peak_banks: u.psum_peak_banks,
            psum_peak_bytes: u.psum_peak_banks * self.limits.psum_bank_bytes,
        }
    }

    /// What is in use now: SBUF bytes per partition and PSUM banks.
    pub fn in_use(&self) -> (usize, usize) {
        let u = self.lock();
        (u.sbuf, u.psum_banks())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut u = self.pool.lock();
        match self.kind {
            OnChip::Sbuf => u.sbuf -= self.amount,
            OnChip::Psum => u.psum.retain(|t| t.id != self.id),
        }
    }
}
