//! The cost table: per-generation engine clocks, widths and bandwidths, and the
//! per-instruction cycle rules, each with its source.
//!
//! Sources (AWS Neuron SDK docs): the NKI architecture guides for Trainium /
//! Inferentia2, Trainium2 and Trainium3 (engine clocks, PE throughput, Vector
//! Engine performance mode, "Performance Consideration" sections), the DMA
//! overview and DMA bandwidth guide (16 DMA engines per core and their B/ns), and
//! the "Estimated instruction cost" notes of the `nki.isa` docstrings (release
//! 2.26, the last to carry them), and the profiles the NKI library's design
//! specs publish (design-rmsnorm-quant, trn2). Where the docs are silent the
//! value is chosen here and marked **chosen**.

use super::record::{Instr, Operand, Unit};
use crate::hw::Generation;
use crate::{Buffer, Dtype};

/// The constants of one target generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// The generation modelled.
    pub target: Generation,
    /// Tensor Engine clock (GHz): 2.8 trn1, 2.4 trn2/trn3 (arch guides, engine table).
    pub tensor_ghz: f64,
    /// Vector Engine clock (GHz): 1.12 trn1, 0.96 trn2, 1.2 trn3.
    pub vector_ghz: f64,
    /// Scalar Engine clock (GHz): 1.4 trn1, 1.2 trn2/trn3.
    pub scalar_ghz: f64,
    /// GpSimd Engine clock (GHz): 1.4 trn1, 1.2 trn2/trn3.
    pub gpsimd_ghz: f64,
    /// Sync Engine clock (GHz): not documented, **chosen** equal to the Scalar Engine's.
    pub sync_ghz: f64,
    /// Fixed initiation interval of every compute instruction (cycles): the
    /// `max(64, N)` / `MM_INIT_LATENCY = 64` of the arch guide and ISA cost notes.
    pub min_cycles: f64,
    /// Matmul slowdown for fp32 operands: 4 passes (arch guide, "fp32 at 1/4 rate").
    pub fp32_matmul_factor: f64,
    /// Vector Engine performance mode for bf16/fp16 copies and tensor_scalar
    /// (trn2+: 4x SBUF to SBUF, 2x with a PSUM side); 1 on trn1.
    pub vector_perf_mode: f64,
    /// Vector Engine performance mode for a bf16/fp16 `tensor_copy` or
    /// `tensor_scalar` writing float8: trn3's Vector Engine takes fp8 in its 512
    /// lanes as bf16 (trn3 arch guide, engine table), so 4x; trn2's guide lists
    /// only 2-byte types, but the NKI library's published rmsnorm_quant profile
    /// (design-rmsnorm-quant, S 160, H 16384) shows its bf16 → fp8
    /// `tensor_scalar` at about twice the 1x rate: **chosen** 2 on trn2; 1 on trn1.
    pub vector_fp8_out_perf_mode: f64,
    /// `scalar_tensor_tensor` cycles per element when one input is in PSUM and
    /// one in SBUF: the ISA cost note gives 2N for every case, the published
    /// rmsnorm_quant profile shows its `[80, 512]` instructions with a PSUM
    /// gamma at about 1.4N on trn2 (the two memories read in parallel, as
    /// `tensor_tensor`'s N for that case): **chosen** 1.4 on trn2 and trn3, 2 on trn1.
    pub stt_psum_cycles_per_element: f64,
    /// Whether `nc_matmul(perf_mode=double_row)` on float8 contracts 256 rows in
    /// the time of a 128-row bf16 matmul (trn2 arch guide, "Double FP8": twice the
    /// bf16 throughput; trn2 and trn3).
    pub fp8_double_row: bool,
    /// Whether the Scalar Engine streams 2-byte data at 2 elements/cycle (trn3: 256 bf16 lanes).
    pub scalar_double_bf16: bool,
    /// Extra cycles before a dependent instruction of a compute engine may use a
    /// result: **chosen** 200 so that a dependent chain of 1-element activations
    /// issues every 264 cycles, the interval the perf guide measured (189 ns on trn1).
    pub dependency_cycles: f64,
    /// DMA engines per NeuronCore (16; DMA overview).
    pub dma_engines: usize,
    /// Peak bytes per ns of one DMA engine: 17 trn1, 23 trn2, 33 trn3 (DMA bandwidth guide).
    pub dma_engine_bytes_per_ns: f64,
    /// Partitions one DMA engine serves (8: 128 partitions over 16 engines).
    pub dma_partitions_per_engine: usize,
    /// Contiguous run (bytes) at which a DMA's engines reach half their peak:
    /// efficiency `run / (run + 128)` is **chosen** so that, with
    /// [`Costs::dma_transfer_ns`], a `[128, B]` transfer's throughput follows the
    /// DMA overview's curve from 4 KiB up (nki-dma-overview, "DMA Throughput
    /// varying Bytes per Partition": 97 / 98 / 99 % of the 32 KiB point at 4 / 8
    /// / 16 KiB, the bandwidth guide's "≥ 4 KiB per partition saturates").
    pub dma_half_run_bytes: f64,
    /// The least time from a transfer's start to its last byte (ns), however few
    /// its bytes: the flat part of the DMA overview's throughput curve (`p_dim =
    /// 128`), where 32 B to 2 KiB per partition each take about 850 ns at trn2's
    /// 368 B/ns (read off the figure: 5 / 10 / 21 / 42 / 81 % of the 32 KiB
    /// point's throughput at 128 / 256 / 512 / 1024 / 2048 B); the bandwidth
    /// guide's per-transfer overhead. It is latency, not occupancy: the engines
    /// serve other queues' transfers meanwhile (the kernel-optimization
    /// tutorial's naive matmul keeps the Tensor Engine 87 % busy on 512 B and 2
    /// KiB loads, which an 850 ns occupancy each would halve). The figure names
    /// no generation: **chosen** the same on trn1 and trn3.
    pub dma_transfer_ns: f64,
    /// Rate of a DMA transpose relative to a copy: at most 90 % from HBM and 50 %
    /// SBUF to SBUF on trn2 (arch guide, "DMA Transpose"); the same **chosen** for
    /// trn1 and trn3.
    pub dma_transpose_rate: (f64, f64),
    /// Time from a DMA's last byte until a consumer on another engine sees it, and
    /// from a producer to the start of a DMA that depends on it (ns): the DMA
    /// overview's ~1.3 µs trigger/semaphore-to-start latency, hidden when DMAs queue up.
    pub dma_latency_ns: f64,
    /// Device-link bandwidth one rank's collectives get (bytes/ns): the chip's
    /// NeuronLink bandwidth over its cores (384/2 trn1, 1280/8 trn2, 2560/8 trn3), capped
    /// at the core's DMA rate; **chosen**, the collectives docs give no formula.
    pub link_bytes_per_ns: f64,
    /// Fixed latency of a collective step (ns): **chosen** equal to the DMA latency.
    pub collective_latency_ns: f64,
    /// Dense bf16 Tensor Engine peak (FLOP/s): 92 T trn1, 79 T trn2/trn3 (arch guides).
    pub tensor_peak_flops: f64,
}

impl Costs {
    /// The table of `target`.
    pub fn of(target: Generation) -> Costs {
        let (tensor_ghz, vector_ghz, act_ghz, dma_bw, link, perf, act2) = match target {
            Generation::Trn1 => (2.8, 1.12, 1.4, 17.0, 384.0 / 2.0, 1.0, false),
            Generation::Trn2 => (2.4, 0.96, 1.2, 23.0, 1280.0 / 8.0, 4.0, false),
            Generation::Trn3 => (2.4, 1.2, 1.2, 33.0, 2560.0 / 8.0, 4.0, true),
        };
        let (fp8_out, stt_psum) = match target {
            Generation::Trn1 => (1.0, 2.0),
            Generation::Trn2 => (2.0, 1.4),
            Generation::Trn3 => (4.0, 1.4),
        };
        let dma_engines = 16;
        Costs {
            target,
            tensor_ghz,
            vector_ghz,
            scalar_ghz: act_ghz,
            gpsimd_ghz: act_ghz,
            sync_ghz: act_ghz,
            min_cycles: 64.0,
            fp32_matmul_factor: 4.0,
            vector_perf_mode: perf,
            vector_fp8_out_perf_mode: fp8_out,
            stt_psum_cycles_per_element: stt_psum,
            fp8_double_row: target != Generation::Trn1,
            scalar_double_bf16: act2,
            dependency_cycles: 200.0,
            dma_engines,
            dma_engine_bytes_per_ns: dma_bw,
            dma_partitions_per_engine: 8,
            dma_half_run_bytes: 128.0,
            dma_transfer_ns: 850.0,
            dma_transpose_rate: (0.9, 0.5),
            dma_latency_ns: 1300.0,
            link_bytes_per_ns: f64::min(link, dma_bw * dma_engines as f64),
            collective_latency_ns: 1300.0,
            // 128 x 128 MACs, 2 FLOP each, one moving column per cycle.
            tensor_peak_flops: 128.0 * 128.0 * 2.0 * tensor_ghz * 1e9,
        }
    }

    /// The clock of a compute unit (GHz); DMA and collectives are timed in ns.
    pub fn ghz(&self, unit: Unit) -> f64 {
        match unit {
            Unit::Tensor => self.tensor_ghz,
            Unit::Vector => self.vector_ghz,
            Unit::Scalar => self.scalar_ghz,
            Unit::GpSimd => self.gpsimd_ghz,
            Unit::Sync | Unit::Dma | Unit::Collective => self.sync_ghz,
        }
    }

    /// Peak bytes per ns of the core's DMA engines together.
    pub fn dma_peak_bytes_per_ns(&self) -> f64 {
        self.dma_engine_bytes_per_ns * self.dma_engines as f64
    }

    /// The delay between a producer on `from` finishing and a dependent instruction
    /// on `to` starting (ns). Matmuls accumulating into one PSUM tile follow each
    /// other without a wait (the Tensor Engine's in-order pipeline); a DMA waits for
    /// its trigger; any other dependency waits for the producer's pipeline.
    pub fn dependency_ns(&self, from: Unit, to: Unit) -> f64 {
        match (from, to) {
            (Unit::Tensor, Unit::Tensor) => 0.0,
            (Unit::Dma | Unit::Collective, _) | (_, Unit::Dma | Unit::Collective) => self.dma_latency_ns,
            _ => self.dependency_cycles / self.ghz(from),
        }
    }
}

/// What one instruction costs.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Cost {
    /// Time the instruction occupies its unit (ns).
    pub busy_ns: f64,
    /// Floating-point operations (a matmul's 2·K·M·N; one per output element elsewhere).
    pub flops: f64,
    /// Bytes moved between memories (DMA and collectives).
    pub bytes: f64,
    /// Time from its start until its result is complete (ns): `busy_ns`, or
    /// for a short DMA transfer the least time any transfer takes
    /// ([`Costs::dma_transfer_ns`]), during which its unit is free for others.
    pub done_ns: f64,
}

fn is_2byte_float(d: Dtype) -> bool {
    matches!(d, Dtype::Bf16 | Dtype::F16)
}

fn is_fp8(d: Dtype) -> bool {
    matches!(d, Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2)
}

/// The Vector Engine performance mode of a `tensor_copy` or `tensor_scalar`
/// (trn2 arch guide, "Vector Engine Performance Mode"): 2-byte float inputs and
/// outputs, 4x SBUF to SBUF and 2x with a PSUM side; float8 outputs at
/// [`Costs::vector_fp8_out_perf_mode`]; 1x otherwise.
fn vector_perf_mode(c: &Costs, i: &Instr) -> f64 {
    let inputs_2byte = i.reads.iter().all(|o| is_2byte_float(o.dtype));
    let mode = if !inputs_2byte {
        1.0
    } else if i.writes.iter().all(|o| is_2byte_float(o.dtype)) {
        c.vector_perf_mode
    } else if i.writes.iter().all(|o| is_fp8(o.dtype)) {
        c.vector_fp8_out_perf_mode
    } else {
        1.0
    };
    let all_sbuf = i.reads.iter().chain(&i.writes).all(|o| o.buffer == Buffer::Sbuf);
    if all_sbuf { mode } else { mode.min(2.0) }
}

/// Free elements per partition the instruction streams: its largest operand's.
fn stream_len(i: &Instr) -> f64 {
    i.reads.iter().chain(&i.writes).map(|o| o.free).max().unwrap_or(1) as f64
}

fn output_elements(i: &Instr) -> f64 {
    i.writes.iter().map(Operand::elements).sum::<usize>() as f64
}

/// The cycles of a Tensor Engine instruction: a matmul streams its moving
/// operand's columns, at least 64 cycles each (ISA cost note: `max(N, 64)`), four
/// passes for fp32; a double-row float8 matmul streams the pairs of its moving
/// columns in the time of as many bf16 columns; a PE transpose of a `[P, F]`
/// tile costs `max(P, min(64, F))`.
fn tensor_cycles(c: &Costs, i: &Instr) -> (f64, f64) {
    match (i.op, i.reads.as_slice()) {
        // `perf_mode=double_row`: float8 operands `[K, 2, M]` and `[K, 2, N]`
        // into `[M, N]`, so the output has half the stationary's free elements.
        ("nisa.nc_matmul", [stationary, moving, ..])
            if c.fp8_double_row
                && is_fp8(stationary.dtype)
                && is_fp8(moving.dtype)
                && i.writes.first().is_some_and(|d| 2 * d.partitions == stationary.free && 2 * d.free == moving.free) =>
        {
            let (m, n) = ((stationary.free / 2) as f64, (moving.free / 2) as f64);
            (n.max(c.min_cycles), 2.0 * 2.0 * moving.partitions as f64 * m * n)
        }
        ("nisa.nc_matmul", [stationary, moving, ..]) => {
            let n = moving.free as f64;
            let factor = if stationary.dtype == Dtype::F32 { c.fp32_matmul_factor } else { 1.0 };
            let flops = 2.0 * moving.partitions as f64 * stationary.free as f64 * n;
            (n.max(c.min_cycles) * factor, flops)
        }
        // As nc_matmul, each packed element contracting four values (nc_matmul_mx docs).
        ("nisa.nc_matmul_mx", [stationary, moving, ..]) => {
            let n = moving.free as f64;
            (n.max(c.min_cycles), 2.0 * 4.0 * moving.partitions as f64 * stationary.free as f64 * n)
        }
        (_, [data, ..]) => {
            let (p, f) = (data.partitions as f64, data.free as f64);
            (p.max(f.min(c.min_cycles)), 0.0)
        }
        _ => (c.min_cycles, 0.0),
    }
}

/// The cycles of a Vector, Scalar or GpSimd instruction streaming `n` elements per
/// partition, from the ISA cost notes: one element per cycle for one-input ops,
/// two for two inputs, with the documented exceptions and the performance modes.
fn elementwise_cycles(c: &Costs, unit: Unit, i: &Instr) -> f64 {
    let n = stream_len(i);
    let all = || i.reads.iter().chain(&i.writes);
    let psum_inputs = i.reads.iter().filter(|o| o.buffer == Buffer::Psum).count();
    let work = match i.op {
        // 2N; N with one PSUM and one SBUF input, or with all-bf16 SBUF operands.
        "nisa.tensor_tensor" => {
            let bf16_sbuf = all().all(|o| o.dtype == Dtype::Bf16 && o.buffer == Buffer::Sbuf);
            if psum_inputs == 1 || bf16_sbuf { n } else { 2.0 * n }
        }
        // 2N; with one PSUM and one SBUF input, fewer (see the constant).
        "nisa.scalar_tensor_tensor" => {
            if psum_inputs == 1 && i.reads.len() > psum_inputs {
                c.stt_psum_cycles_per_element * n
            } else {
                2.0 * n
            }
        }
        // 2N (ISA cost note).
        "nisa.tensor_tensor_scan" => 2.0 * n,
        "nisa.tensor_scalar_reduce" => n + c.min_cycles,
        "nisa.reciprocal" => 8.0 * n,
        // N; bf16 inputs reduce two elements per cycle.
        "nisa.tensor_reduce" => {
            if i.reads.iter().all(|o| o.dtype == Dtype::Bf16) {
                n / 2.0
            } else {
                n
            }
        }
        // 150 + N on the GpSimd Engine.
        "nisa.iota" | "nisa.affine_select" => 150.0 + n,
        // The accumulator read-out adds 64 cycles.
        "nisa.activation_reduce" => n + c.min_cycles,
        // Four source elements per partition per cycle on trn3 (trn3 Vector Engine
        // performance notes).
        "nisa.quantize_mx" => n / 4.0,
        // `4 n + K` per partition (topk docs), with n at the snake's capacity of
        // 16 x src's columns: the profile sees the operands, not `n`.
        "nisa.topk" => match (i.reads.first(), i.writes.first()) {
            (Some(src), Some(vals)) => 4.0 * (nki_spec::constants::TOPK_SNAKE as f64) * src.free as f64 + vals.free as f64,
            _ => n,
        },
        _ => n,
    };
    let speedup = match unit {
        Unit::Vector if matches!(i.op, "nisa.tensor_copy" | "nisa.tensor_scalar") => vector_perf_mode(c, i),
        Unit::Scalar if c.scalar_double_bf16 && all().all(|o| is_2byte_float(o.dtype)) => 2.0,
        _ => 1.0,
    };
    (work / speedup).max(c.min_cycles)
}

/// The DMA time of moving `bytes` spread over `partitions` rows in runs of
/// `run` bytes: the engines serving those rows (8 partitions each) at their peak,
/// derated by the run-length efficiency.
fn dma_ns(c: &Costs, bytes: f64, partitions: usize, run: f64) -> f64 {
    let engines = partitions.div_ceil(c.dma_partitions_per_engine).clamp(1, c.dma_engines) as f64;
    let efficiency = run / (run + c.dma_half_run_bytes);
    bytes / (engines * c.dma_engine_bytes_per_ns * efficiency)
}

/// The cost of instruction `i` on target `c`.
pub fn cost(c: &Costs, i: &Instr) -> Cost {
    let cost = unit_cost(c, i);
    let done_ns = if i.unit == Unit::Dma { cost.busy_ns.max(c.dma_transfer_ns) } else { cost.busy_ns };
    Cost { done_ns, ..cost }
}

/// The cost of `i` on its unit (`done_ns` not set).
fn unit_cost(c: &Costs, i: &Instr) -> Cost {
    match i.unit {
        Unit::Tensor => {
            let (cycles, flops) = tensor_cycles(c, i);
            Cost { busy_ns: cycles / c.tensor_ghz, flops, ..Cost::default() }
        }
        Unit::Vector | Unit::Scalar | Unit::GpSimd => {
            Cost { busy_ns: elementwise_cycles(c, i.unit, i) / c.ghz(i.unit), flops: output_elements(i), ..Cost::default() }
        }
        Unit::Sync => Cost { busy_ns: c.min_cycles / c.sync_ghz, ..Cost::default() },
        Unit::Dma => {
            let bytes = i.writes.iter().map(Operand::bytes).sum::<usize>() as f64;
            let on_chip = i.reads.iter().chain(&i.writes).find(|o| o.buffer == Buffer::Sbuf);
            let partitions = on_chip.or(i.writes.first()).map_or(1, |o| o.partitions);
            let run = i.reads.iter().chain(&i.writes).map(|o| o.run_bytes).min().unwrap_or(1).max(1) as f64;
            let rate = match i.op {
                "nisa.dma_transpose" if i.reads.iter().all(|o| o.buffer == Buffer::Sbuf) => c.dma_transpose_rate.1,
                "nisa.dma_transpose" => c.dma_transpose_rate.0,
                _ => 1.0,
            };
            Cost { busy_ns: dma_ns(c, bytes, partitions, run) / rate, bytes, ..Cost::default() }
        }
        Unit::Collective => {
            // A ring step: every rank sends its payload to its neighbour.
            let bytes = i.writes.iter().map(Operand::bytes).sum::<usize>() as f64;
            let busy = if bytes == 0.0 { 0.0 } else { c.collective_latency_ns + bytes / c.link_bytes_per_ns };
            Cost { busy_ns: busy, bytes, ..Cost::default() }
        }
    }
}
