//! The profile report: estimated time, per-unit busy fractions, the critical
//! path's heaviest instructions, achieved vs peak rates and on-chip memory peaks.

use super::costs::Costs;
use super::record::Unit;
use super::schedule::Timeline;
use crate::emulator::MemoryReport;
use crate::hw::Generation;
use crate::io::json;
use std::fmt;

/// Instructions of one op on the critical path.
#[derive(Clone, Debug, PartialEq)]
pub struct CriticalOp {
    /// The NKI name.
    pub op: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// How many of them lie on the path.
    pub count: usize,
    /// Their time on the path (ns).
    pub ns: f64,
}

/// What a profiled launch would take on the target.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The modelled generation.
    pub target: Generation,
    /// NeuronCores (programs × ranks) the launch occupies.
    pub cores: usize,
    /// Instructions scheduled.
    pub instructions: usize,
    /// Estimated wall time (s).
    pub estimated_seconds: f64,
    /// Per unit: its busy time over all cores as a fraction of cores × estimated time.
    pub engine_busy: Vec<(Unit, f64)>,
    /// The busiest unit.
    pub bottleneck: Unit,
    /// Floating-point operations (matmul 2·K·M·N; one per element elsewhere).
    pub flops: f64,
    /// The Tensor Engine's part of `flops`.
    pub tensor_flops: f64,
    /// Bytes moved by DMA (spills included) and collectives.
    pub bytes: f64,
    /// Dense bf16 Tensor Engine peak of all cores (FLOP/s).
    pub peak_flops: f64,
    /// DMA peak of all cores (bytes/s).
    pub peak_bytes_per_second: f64,
    /// The heaviest ops on the critical path, heaviest first.
    pub critical_path: Vec<CriticalOp>,
    /// Peak SBUF bytes per partition of any program.
    pub sbuf_peak_bytes: usize,
    /// Peak PSUM bytes per partition of any program.
    pub psum_peak_bytes: usize,
    /// Bytes spilled from SBUF to HBM, all programs (the profiler's `spill_save_bytes`).
    pub spill_save_bytes: usize,
    /// Bytes reloaded from those spills (`spill_reload_bytes`).
    pub spill_reload_bytes: usize,
}

/// How many ops of the critical path the report lists.
const CRITICAL_OPS: usize = 5;

impl Report {
    /// The report of `timeline` on `costs`, with the programs' memory peaks.
    pub fn new(costs: &Costs, timeline: &Timeline, memory: &[MemoryReport]) -> Report {
        let seconds = timeline.makespan_ns() * 1e-9;
        let cores = timeline.slices.len().max(1);
        let all = || timeline.slices.iter().flatten();
        let busy = |u: Unit| all().filter(|s| s.unit == u).map(|s| s.cost.busy_ns).sum::<f64>() * 1e-9;
        let engine_busy: Vec<(Unit, f64)> =
            Unit::ALL.iter().map(|&u| (u, if seconds > 0.0 { busy(u) / (seconds * cores as f64) } else { 0.0 })).collect();
        let bottleneck = engine_busy.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map_or(Unit::Tensor, |b| b.0);
        let mut critical: Vec<CriticalOp> = Vec::new();
        for s in timeline.critical_path() {
            match critical.iter_mut().find(|c| c.op == s.op && c.unit == s.unit) {
                Some(c) => {
                    c.count += 1;
                    c.ns += s.cost.busy_ns;
                }
                None => critical.push(CriticalOp { op: s.op, unit: s.unit, count: 1, ns: s.cost.busy_ns }),
            }
        }
        critical.sort_by(|a, b| b.ns.total_cmp(&a.ns));
        critical.truncate(CRITICAL_OPS);
        Report {
            target: costs.target,
            cores,
            instructions: all().count(),
            estimated_seconds: seconds,
            engine_busy,
            bottleneck,
            flops: total(all().map(|s| s.cost.flops)),
            tensor_flops: total(all().filter(|s| s.unit == Unit::Tensor).map(|s| s.cost.flops)),
            bytes: total(all().map(|s| s.cost.bytes)),
            peak_flops: costs.tensor_peak_flops * cores as f64,
            peak_bytes_per_second: costs.dma_peak_bytes_per_ns() * 1e9 * cores as f64,
            critical_path: critical,
            sbuf_peak_bytes: memory.iter().map(|m| m.sbuf_peak).max().unwrap_or(0),
            psum_peak_bytes: memory.iter().map(|m| m.psum_peak_bytes).max().unwrap_or(0),
            spill_save_bytes: memory.iter().map(|m| m.spill_save_bytes).sum(),
            spill_reload_bytes: memory.iter().map(|m| m.spill_reload_bytes).sum(),
        }
    }

    /// The busy fraction of `unit`.
    pub fn busy(&self, unit: Unit) -> f64 {
        self.engine_busy.iter().find(|b| b.0 == unit).map_or(0.0, |b| b.1)
    }

    /// Achieved Tensor Engine FLOP/s.
    pub fn tensor_flops_per_second(&self) -> f64 {
        if self.estimated_seconds > 0.0 { self.tensor_flops / self.estimated_seconds } else { 0.0 }
    }

    /// Achieved DMA bytes/s.
    pub fn bytes_per_second(&self) -> f64 {
        if self.estimated_seconds > 0.0 { self.bytes / self.estimated_seconds } else { 0.0 }
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> String {
        let busy = json::object(self.engine_busy.iter().map(|(u, f)| (u.name(), json::number(*f))));
        let critical = json::array(self.critical_path.iter().map(|c| {
            json::object([
                ("op", json::string(c.op)),
                ("engine", json::string(c.unit.name())),
                ("count", c.count.to_string()),
                ("seconds", json::number(c.ns * 1e-9)),
            ])
        }));
        json::object([
            ("target", json::string(&self.target.to_string())),
            ("cores", self.cores.to_string()),
            ("instructions", self.instructions.to_string()),
            ("estimated_seconds", json::number(self.estimated_seconds)),
            ("engine_busy", busy),
            ("bottleneck", json::string(self.bottleneck.name())),
            ("flops", json::number(self.flops)),
            ("tensor_flops", json::number(self.tensor_flops)),
            ("tensor_flops_per_second", json::number(self.tensor_flops_per_second())),
            ("peak_flops_per_second", json::number(self.peak_flops)),
            ("bytes", json::number(self.bytes)),
            ("bytes_per_second", json::number(self.bytes_per_second())),
            ("peak_bytes_per_second", json::number(self.peak_bytes_per_second)),
            ("critical_path", critical),
            ("sbuf_peak_bytes_per_partition", self.sbuf_peak_bytes.to_string()),
            ("psum_peak_bytes_per_partition", self.psum_peak_bytes.to_string()),
            ("spill_save_bytes", self.spill_save_bytes.to_string()),
            ("spill_reload_bytes", self.spill_reload_bytes.to_string()),
        ])
    }
}

/// A duration in seconds, in the unit that reads best (`1.234 ms`).
pub fn human_time(s: f64) -> String {
    match s {
        s if s >= 1.0 => format!("{s:.3} s"),
        s if s >= 1e-3 => format!("{:.3} ms", s * 1e3),
        s => format!("{:.3} µs", s * 1e6),
    }
}

/// The sum of `values`, `0.0` when there are none: `Iterator::sum` of no `f64`s
/// is `-0.0`, which the report would print as `-0.00 TFLOP/s (-0.0 %)`.
fn total(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "estimated time on {}: {} ({} instructions on {} NeuronCore{}); bottleneck: {}",
            self.target,
            human_time(self.estimated_seconds),
            self.instructions,
            self.cores,
            if self.cores == 1 { "" } else { "s" },
            self.bottleneck.name()
        )?;
        writeln!(f, "engine busy:")?;
        for (u, b) in self.engine_busy.iter().filter(|b| b.1 > 0.0) {
            writeln!(f, "  {:<10} {:>6.2} %", u.name(), b * 100.0)?;
        }
        writeln!(
            f,
            "tensor engine: {:.2} TFLOP/s of {:.2} peak ({:.1} %)",
            self.tensor_flops_per_second() * 1e-12,
            self.peak_flops * 1e-12,
            100.0 * self.tensor_flops_per_second() / self.peak_flops
        )?;
        writeln!(
            f,
            "dma: {:.1} GB/s of {:.1} peak ({:.1} %)",
            self.bytes_per_second() * 1e-9,
            self.peak_bytes_per_second * 1e-9,
            100.0 * self.bytes_per_second() / self.peak_bytes_per_second
        )?;
        writeln!(f, "critical path (heaviest ops):")?;
        for c in &self.critical_path {
            writeln!(f, "  {:<28} {:<10} {:>7} x  {}", c.op, c.unit.name(), c.count, human_time(c.ns * 1e-9))?;
        }
        write!(
            f,
            "on-chip peaks per partition: SBUF {} KiB live, PSUM {} KiB",
            self.sbuf_peak_bytes.div_ceil(1024),
            self.psum_peak_bytes.div_ceil(1024)
        )?;
        if self.spill_save_bytes + self.spill_reload_bytes > 0 {
            write!(
                f,
                "\nSBUF spills: {:.2} MiB saved to HBM, {:.2} MiB reloaded",
                self.spill_save_bytes as f64 / (1 << 20) as f64,
                self.spill_reload_bytes as f64 / (1 << 20) as f64
            )?;
        }
        Ok(())
    }
}
