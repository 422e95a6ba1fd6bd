//! Profiling: a kernel's Trainium timeline estimated from the instructions the
//! emulator executes.
//!
//! A profiled launch ([`Launch::profile`](crate::Launch::profile)) records every
//! instruction of every program: its unit, operands (dtype, shape, bytes, the
//! storage region read or overwritten) and whom it waits for. [`schedule()`] places
//! them on the units of the target generation, each starting once the
//! instructions whose tiles it depends on are done and its unit has room for
//! it, an independent instruction moving ahead of up to
//! [`schedule::SCHEDULING_WINDOW`] earlier ones that wait (the compiler's
//! schedule), with durations from the documented cost rules in [`costs`]. The SBUF spills the
//! compiler would insert (see [`crate::emulator::memory`]) are DMA instructions of
//! the stream (`spill_save`, `spill_reload`). [`Report`] summarises
//! the timeline; [`trace_json`] writes it for ui.perfetto.dev.

pub mod costs;
pub mod record;
pub mod report;
pub mod schedule;
mod spills;
pub mod trace;

pub use costs::{Cost, Costs, cost};
pub use record::{Instr, Operand, Region, Rendezvous, Unit};
pub use report::{CriticalOp, Report, human_time};
pub use schedule::{Slice, Stream, Timeline, schedule};
pub(crate) use spills::with_spills;
pub use spills::{SPILL_RELOAD, SPILL_SAVE};
pub use trace::trace_json;

/// The generation a profile models (trn1, trn2, trn3).
pub use crate::hw::Generation as Target;

use crate::Result;
use crate::emulator::MemoryReport;

/// Everything a profiled launch recorded.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// One stream per program of every rank, rank-major.
    pub streams: Vec<Stream>,
    /// Each program's on-chip memory peaks, in the same order.
    pub memory: Vec<MemoryReport>,
}

/// A scheduled recording: the timeline and its report.
#[derive(Clone, Debug)]
pub struct Profile {
    /// The scheduled instructions.
    pub timeline: Timeline,
    /// Its summary.
    pub report: Report,
}

impl Profile {
    /// Schedules `recording` on `target`.
    pub fn of(recording: &Recording, target: Target) -> Result<Profile> {
        let costs = Costs::of(target);
        let timeline = schedule(&costs, &recording.streams)?;
        let report = Report::new(&costs, &timeline, &recording.memory);
        Ok(Profile { timeline, report })
    }

    /// The trace-event JSON of the timeline.
    pub fn trace_json(&self) -> String {
        trace_json(&self.timeline)
    }
}
