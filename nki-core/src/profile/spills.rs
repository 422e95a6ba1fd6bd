//! The compiler's SBUF spills as DMA instructions of a program's stream.
//!
//! The memory model ([`crate::emulator::memory`]) replays a program's SBUF touches
//! and lists the saves and reloads the compiler would insert; here each becomes
//! a DMA between the tile's bytes and an HBM slot of their own, placed before the
//! instruction that needs the room (a save) or the data (a reload). That
//! instruction waits for the saves before it (their space is what it uses), and
//! the operand regions make a reload wait for the tile's earlier accesses and the
//! instruction reading it wait for the reload.

use super::record::{Instr, Operand, Region, Unit};
use crate::Buffer;
use crate::emulator::memory::{Spill, SpillKind};

/// Marks the storage ids of spill slots in HBM (real storage ids stay far below).
const SLOT_ID: u64 = 1 << 63;

/// The op name of a spill save in traces and reports.
pub const SPILL_SAVE: &str = "spill_save";
/// The op name of a spill reload in traces and reports.
pub const SPILL_RELOAD: &str = "spill_reload";

fn spill_instr(s: &Spill) -> Instr {
    let size = s.dtype.size_bytes();
    let (lo, hi) = (s.bytes.0 / size, s.bytes.1.div_ceil(size).max(s.bytes.0 / size + 1));
    let region = Region { storage: s.storage, rows: (0, s.partitions as isize - 1), cols: (lo as isize, hi as isize - 1) };
    let operand = |buffer: Buffer, storage: u64| Operand {
        region: Region { storage, ..region },
        buffer,
        dtype: s.dtype,
        partitions: s.partitions,
        free: hi - lo,
        run_bytes: s.bytes.1 - s.bytes.0,
    };
    let (sbuf, hbm) = (operand(Buffer::Sbuf, s.storage), operand(Buffer::PrivateHbm, s.storage | SLOT_ID));
    let (op, reads, writes) = match s.kind {
        SpillKind::Save => (SPILL_SAVE, sbuf, hbm),
        SpillKind::Reload => (SPILL_RELOAD, hbm, sbuf),
    };
    Instr { op, unit: Unit::Dma, reads: vec![reads], writes: vec![writes], rendezvous: Default::default(), deps: Vec::new() }
}

/// The recorded instructions (each with its position in program order) with the
/// `spills` inserted before the instructions they serve.
pub(crate) fn with_spills(recorded: Vec<(u64, Instr)>, spills: &[Spill]) -> Vec<Instr> {
    let mut out = Vec::with_capacity(recorded.len() + spills.len());
    let mut pending = spills.iter().peekable();
    for (pos, mut instr) in recorded {
        while let Some(s) = pending.next_if(|s| s.at <= pos) {
            if s.kind == SpillKind::Save {
                instr.deps.push(out.len());
            }
            out.push(spill_instr(s));
        }
        out.push(instr);
    }
    out.extend(pending.map(spill_instr));
    out
}
