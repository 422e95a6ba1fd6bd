//! How much SBUF `ring_attention_spmd_bwd` needs, and so the longest sequence
//! slice per rank it fits: K, V, dK and dV of the whole slice stay on chip for
//! the whole ring.

use super::config::{RingBwdConfig, head_tiles};
use nki::Dtype;

const fn min(a: i64, b: i64) -> i64 {
    if a < b { a } else { b }
}

const fn max(a: i64, b: i64) -> i64 {
    if a > b { a } else { b }
}

/// SBUF bytes per partition one program of the kernel holds at its peak, with
/// `seqlen` tokens per rank, head dim `head_dim`, `in_bytes`-byte inputs,
/// `acc_bytes`-byte accumulators (4 with mixed precision), with `ring` the
/// buffers of visiting steps (more than one worker), and `bound_tiles` fp32 bound
/// tiles per query row (1 with the causal mask on a ring; with windows, chunks
/// or zigzag blocks 2 for step 0 and 2 more for a visiting step; else 0), and
/// with `segments` the fp32 segment ids: the local keys' on every partition and
/// one query tile per row (two on a ring: the local and the visiting queries').
///
/// The sum of the tiles the kernel allocates, live together in the first key
/// tile of a query group's step (each LNC program holds one `(b, h)` item at a
/// time in its own core's SBUF, so the LNC degree does not enter). The earlier
/// `D = rowsum(dY ∘ O)` phase holds O and dY instead of K, V, dK and dV and
/// their row-major copy of dY, which is never more: the row-major dY (at most
/// the size of dY) is covered by dK and dV.
const fn sbuf_bytes(seqlen: i64, head_dim: i64, in_bytes: i64, acc_bytes: i64, ring: bool, bound_tiles: i64, segments: bool) -> i64 {
    let (dts, dnt) = head_tiles(head_dim);
    let q_tiles = seqlen / 128;
    let kts = min(seqlen, 512);
    let blocks = kts / 128;
    let group = min(4, q_tiles);
    // The whole slice, through every step: -LSE and D of the local queries, K and V, dK and dV.
    let resident = 2 * q_tiles * acc_bytes + 2 * dnt * seqlen * (in_bytes + acc_bytes);
    // A visiting step's -LSE and D, and its fp32 bounds.
    let visiting = if ring { q_tiles * 2 * acc_bytes } else { 0 } + q_tiles * 4 * bound_tiles;
    // One group of query tiles: Q and dY, their transposes, the group's dQ.
    let queries = dnt * group * (2 * 128 * in_bytes + 2 * dts * in_bytes + 128 * acc_bytes);
    // One key tile: P and dS, a zero bias, then the larger of the fp32 masked
    // scores (per query tile) and the transposed K and dS blocks.
    let keys = 2 * group * kts * in_bytes + 4 + max(kts * 4, blocks * (dnt * dts + group * 128) * in_bytes);
    let ids = if segments { 4 * seqlen + q_tiles * 4 * if ring { 2 } else { 1 } } else { 0 };
    resident + visiting + queries + keys + ids
}

impl RingBwdConfig {
    /// Bytes of one accumulator element: fp32 with mixed precision, else the input dtype's.
    const fn acc_bytes(&self, input: Dtype) -> i64 {
        if self.mixed_precision { 4 } else { input.size_bytes() as i64 }
    }

    /// The kernel's SBUF bytes per partition for `seqlen` tokens per rank, when the
    /// head dim and the input dtype are known.
    pub const fn sbuf_bytes_at(&self, seqlen: i64) -> Option<i64> {
        match (self.ring.dims, self.dtype) {
            (Some(d), Some(dt)) => {
                let ring = self.ring.num_workers > 1;
                // Step 0's bounds stay live through the visiting steps, which hold their own.
                let bound_tiles = if self.ring.zigzag() || self.ring.window.is_some() || self.ring.chunk_size.is_some() {
                    if ring { 4 } else { 2 }
                } else if self.ring.causal && ring {
                    1
                } else {
                    0
                };
                Some(sbuf_bytes(seqlen, d.head_dim, dt.size_bytes() as i64, self.acc_bytes(dt), ring, bound_tiles, self.segment_ids))
            }
            _ => None,
        }
    }

    /// The SBUF bytes per partition of the configured shapes, when they and the dtype are known.
    pub const fn sbuf_bytes(&self) -> Option<i64> {
        match self.ring.dims {
            Some(d) => self.sbuf_bytes_at(d.seqlen),
            None => None,
        }
    }

    /// SBUF bytes per partition of the target generation.
    pub const fn sbuf_capacity(&self) -> i64 {
        self.ring.target.limits().sbuf_bytes_per_partition as i64
    }

    /// The longest sequence slice per rank (a multiple of 128 tokens) whose tiles fit the target's SBUF, for the configured head dim,
    /// dtype, precision and ring; 0 when none does, `None` while the head dim or
    /// the dtype is unknown.
    ///
    /// ```
    /// use nki_attention::{ring_bwd::RingBwdConfig, ring_fwd::RingDims};
    /// use nki_core::{Dtype, hw::Generation};
    /// let dims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };
    /// let cfg = RingBwdConfig::new(8).dims(dims).dtype(Dtype::Bf16);
    /// assert_eq!(cfg.max_seqlen(), Some(17280));
    /// assert!(cfg.target(Generation::Trn3).max_seqlen() > cfg.max_seqlen());
    /// ```
    pub const fn max_seqlen(&self) -> Option<i64> {
        if self.ring.dims.is_none() {
            return None;
        }
        let mut best = 0;
        let mut s = 128;
        loop {
            let Some(bytes) = self.sbuf_bytes_at(s) else {
                return None;
            };
            if bytes > self.sbuf_capacity() {
                return Some(best);
            }
            best = s;
            s += 128;
        }
    }
}
