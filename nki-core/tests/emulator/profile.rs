//! The profiler: each instruction class costs what its documented rule says, a
//! hand-computed two-instruction kernel schedules and traces as expected, and the
//! trace is valid trace-event JSON.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, ActivationOpts};
use nki_core::profile::{Cost, Costs, Instr, Operand, Region, Rendezvous, Target, Unit, cost};
use nki_core::{Buffer, Dtype, Launch, Tensor, nl};
use serde_json::Value;

/// An operand of `partitions` x `free` elements in `buffer`, contiguous rows.
fn operand(buffer: Buffer, dtype: Dtype, partitions: usize, free: usize) -> Operand {
    let region = Region { storage: 1, rows: (0, partitions as isize - 1), cols: (0, free as isize - 1) };
    Operand { region, buffer, dtype, partitions, free, run_bytes: free * dtype.size_bytes() }
}

fn instr(op: &'static str, unit: Unit, reads: Vec<Operand>, writes: Vec<Operand>) -> Instr {
    Instr { op, unit, reads, writes, rendezvous: Rendezvous::None, deps: Vec::new() }
}

fn sb(dtype: Dtype, p: usize, f: usize) -> Operand {
    operand(Buffer::Sbuf, dtype, p, f)
}

fn ps(dtype: Dtype, p: usize, f: usize) -> Operand {
    operand(Buffer::Psum, dtype, p, f)
}

/// Cost on `target`.
fn on(target: Generation, i: &Instr) -> Cost {
    cost(&Costs::of(target), i)
}

fn assert_ns(got: f64, want: f64) {
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "got {got} ns, want {want} ns");
}

/// Matmul: `max(N_moving, 64)` Tensor Engine cycles, four times that for fp32;
/// FLOPs 2·K·M·N.
#[test]
fn matmul_costs_its_moving_columns() {
    let mm =
        |dt: Dtype, n: usize| instr("nisa.nc_matmul", Unit::Tensor, vec![sb(dt, 128, 128), sb(dt, 128, n)], vec![ps(Dtype::F32, 128, n)]);
    let c = on(Generation::Trn2, &mm(Dtype::Bf16, 512));
    assert_ns(c.busy_ns, 512.0 / 2.4);
    assert_eq!(c.flops, 2.0 * 128.0 * 128.0 * 512.0);
    assert_ns(on(Generation::Trn2, &mm(Dtype::Bf16, 16)).busy_ns, 64.0 / 2.4);
    assert_ns(on(Generation::Trn2, &mm(Dtype::F32, 512)).busy_ns, 4.0 * 512.0 / 2.4);
    assert_ns(on(Generation::Trn1, &mm(Dtype::Bf16, 512)).busy_ns, 512.0 / 2.8);
    // 128 x 128 x 512 every 512 cycles at 2.4 GHz is the documented 79 TFLOPS.
    assert!((Costs::of(Target::Trn2).tensor_peak_flops - 78.6e12).abs() < 0.1e12);
}

/// PE transpose of `[P, F]`: `max(P, min(64, F))` cycles.
#[test]
fn pe_transpose_cost() {
    let t = |p: usize, f: usize| instr("nisa.nc_transpose", Unit::Tensor, vec![sb(Dtype::F32, p, f)], vec![ps(Dtype::F32, f, p)]);
    assert_ns(on(Generation::Trn2, &t(128, 128)).busy_ns, 128.0 / 2.4);
    assert_ns(on(Generation::Trn2, &t(32, 16)).busy_ns, 32.0 / 2.4);
    assert_ns(on(Generation::Trn2, &t(16, 128)).busy_ns, 64.0 / 2.4);
}

/// Scalar Engine activation: `max(64, N)` cycles; the reducing form adds 64; trn3
/// streams bf16 at two elements per cycle.
#[test]
fn activation_costs() {
    let a = |op, dt, n| instr(op, Unit::Scalar, vec![sb(dt, 128, n)], vec![sb(dt, 128, n)]);
    assert_ns(on(Generation::Trn2, &a("nisa.activation", Dtype::F32, 1024)).busy_ns, 1024.0 / 1.2);
    assert_ns(on(Generation::Trn2, &a("nisa.activation", Dtype::F32, 10)).busy_ns, 64.0 / 1.2);
    assert_ns(on(Generation::Trn1, &a("nisa.activation", Dtype::F32, 1024)).busy_ns, 1024.0 / 1.4);
    assert_ns(on(Generation::Trn2, &a("nisa.activation_reduce", Dtype::F32, 1024)).busy_ns, (1024.0 + 64.0) / 1.2);
    assert_ns(on(Generation::Trn3, &a("nisa.activation", Dtype::Bf16, 1024)).busy_ns, 512.0 / 1.2);
    assert_ns(on(Generation::Trn2, &a("nisa.activation", Dtype::Bf16, 1024)).busy_ns, 1024.0 / 1.2);
}

/// Vector Engine: one element per cycle per input, with the documented
/// exceptions and the trn2+ performance mode for bf16 copies.
#[test]
fn vector_engine_costs() {
    let n = 2048usize;
    let v = |op, reads, writes| instr(op, Unit::Vector, reads, writes);
    let tt = |a: Operand, b: Operand, d: Operand| v("nisa.tensor_tensor", vec![a, b], vec![d]);
    let g = Generation::Trn2;
    let ghz = 0.96;
    // 2N for two fp32 SBUF inputs; N with one PSUM input, or all-bf16 SBUF.
    assert_ns(on(g, &tt(sb(Dtype::F32, 128, n), sb(Dtype::F32, 128, n), sb(Dtype::F32, 128, n))).busy_ns, 2.0 * n as f64 / ghz);
    assert_ns(on(g, &tt(ps(Dtype::F32, 128, n), sb(Dtype::F32, 128, n), sb(Dtype::F32, 128, n))).busy_ns, n as f64 / ghz);
    assert_ns(on(g, &tt(sb(Dtype::Bf16, 128, n), sb(Dtype::Bf16, 128, n), sb(Dtype::Bf16, 128, n))).busy_ns, n as f64 / ghz);
    // tensor_copy bf16: 4x SBUF to SBUF, 2x from PSUM on trn2; no mode on trn1.
    let copy = |src: Operand| v("nisa.tensor_copy", vec![src], vec![sb(Dtype::Bf16, 128, n)]);
    assert_ns(on(g, &copy(sb(Dtype::Bf16, 128, n))).busy_ns, n as f64 / 4.0 / ghz);
    assert_ns(on(g, &copy(ps(Dtype::Bf16, 128, n))).busy_ns, n as f64 / 2.0 / ghz);
    assert_ns(on(Generation::Trn1, &copy(sb(Dtype::Bf16, 128, n))).busy_ns, n as f64 / 1.12);
    assert_ns(on(g, &copy(sb(Dtype::F32, 128, n))).busy_ns, n as f64 / ghz);
    // The 64-cycle floor.
    let small = v("nisa.tensor_copy", vec![sb(Dtype::F32, 128, 8)], vec![sb(Dtype::F32, 128, 8)]);
    assert_ns(on(g, &small).busy_ns, 64.0 / ghz);
    // reciprocal 8N; tensor_reduce N (N/2 in bf16); tensor_scalar_reduce N + 64; scalar_tensor_tensor 2N.
    let one = |op, dt| v(op, vec![sb(dt, 128, n)], vec![sb(dt, 128, 1)]);
    assert_ns(on(g, &one("nisa.reciprocal", Dtype::F32)).busy_ns, 8.0 * n as f64 / ghz);
    assert_ns(on(g, &one("nisa.tensor_reduce", Dtype::F32)).busy_ns, n as f64 / ghz);
    assert_ns(on(g, &one("nisa.tensor_reduce", Dtype::Bf16)).busy_ns, n as f64 / 2.0 / ghz);
    assert_ns(on(g, &one("nisa.tensor_scalar_reduce", Dtype::F32)).busy_ns, (n as f64 + 64.0) / ghz);
    let stt = v("nisa.scalar_tensor_tensor", vec![sb(Dtype::F32, 128, n), sb(Dtype::F32, 128, n)], vec![sb(Dtype::F32, 128, n)]);
    assert_ns(on(g, &stt).busy_ns, 2.0 * n as f64 / ghz);
    // tensor_tensor_scan 2N.
    let scan = v("nisa.tensor_tensor_scan", vec![sb(Dtype::F32, 128, n), sb(Dtype::F32, 128, n)], vec![sb(Dtype::F32, 128, n)]);
    assert_ns(on(g, &scan).busy_ns, 2.0 * n as f64 / ghz);
    // GpSimd iota / affine_select: 150 + N at 1.2 GHz.
    let iota = instr("nisa.iota", Unit::GpSimd, vec![], vec![sb(Dtype::F32, 128, n)]);
    assert_ns(on(g, &iota).busy_ns, (150.0 + n as f64) / 1.2);
}

/// DMA: bytes over the engines serving the rows (8 partitions each, at most 16),
/// at 23 B/ns each on trn2, derated by `run / (run + 128)`.
#[test]
fn dma_costs() {
    let hbm = |p: usize, f: usize| operand(Buffer::SharedHbm, Dtype::Bf16, p, f);
    let d = |p: usize, f: usize| instr("nisa.dma_copy", Unit::Dma, vec![hbm(p, f)], vec![sb(Dtype::Bf16, p, f)]);
    let c = on(Generation::Trn2, &d(128, 1024));
    let bytes = 128.0 * 1024.0 * 2.0;
    assert_eq!(c.bytes, bytes);
    assert_ns(c.busy_ns, bytes / (16.0 * 23.0 * (2048.0 / (2048.0 + 128.0))));
    // The DMA overview's A[4, 4096] bf16: one engine, 32 KiB in ~1.4 µs.
    let c = on(Generation::Trn2, &d(4, 4096));
    assert_ns(c.busy_ns, 32768.0 / (23.0 * (8192.0 / (8192.0 + 128.0))));
    assert!((1300.0..1600.0).contains(&c.busy_ns), "{}", c.busy_ns);
    let c = on(Generation::Trn1, &d(128, 1024));
    assert_ns(c.busy_ns, bytes / (16.0 * 17.0 * (2048.0 / (2048.0 + 128.0))));
    // A DMA transpose runs at 90 % of a copy from HBM, 50 % from SBUF.
    let copy = on(Generation::Trn2, &d(128, 1024)).busy_ns;
    let tr = |src: Operand| on(Generation::Trn2, &instr("nisa.dma_transpose", Unit::Dma, vec![src], vec![sb(Dtype::Bf16, 128, 1024)]));
    assert_ns(tr(hbm(128, 1024)).busy_ns, copy / 0.9);
    assert_ns(tr(sb(Dtype::Bf16, 128, 1024)).busy_ns, copy / 0.5);
}

/// A `[128, B]` transfer's throughput against the DMA overview's curve (`p_dim
/// = 128`, trn2), each point read off the figure as a fraction of the 32 KiB
/// point: within 0.8-1.25x at every point from 32 B to 16 KiB per partition.
/// Under 2 KiB the transfer's time is its fixed 850 ns, not engine occupancy.
#[test]
fn dma_throughput_follows_the_documented_curve() {
    const CURVE: [(usize, f64); 10] = [
        (32, 0.014),
        (64, 0.026),
        (128, 0.050),
        (256, 0.103),
        (512, 0.209),
        (1024, 0.424),
        (2048, 0.813),
        (4096, 0.966),
        (8192, 0.983),
        (16384, 0.990),
    ];
    let d = |b: usize| {
        let op = |buffer| operand(buffer, Dtype::F32, 128, b / 4);
        on(Generation::Trn2, &instr("nisa.dma_copy", Unit::Dma, vec![op(Buffer::SharedHbm)], vec![op(Buffer::Sbuf)]))
    };
    let throughput = |b: usize| 128.0 * b as f64 / d(b).done_ns;
    let full = throughput(32768);
    for (b, published) in CURVE {
        let r = throughput(b) / full / published;
        assert!(
            (0.8..=1.25).contains(&r),
            "{b} B per partition: {:.3} of the 32 KiB throughput, published {published} (x{r:.2})",
            throughput(b) / full
        );
    }
    let small = d(256);
    assert_ns(small.done_ns, 850.0);
    assert!(small.busy_ns < 0.2 * small.done_ns, "a short transfer occupies the engines for {} ns", small.busy_ns);
}

/// A collective step: 1.3 µs plus the payload over the core's share of the
/// chip's NeuronLink bandwidth (1280 GB/s over 8 cores on trn2); register and
/// barrier instructions take 64 Sync Engine cycles.
#[test]
fn collective_and_sync_costs() {
    let hbm = |f: usize| operand(Buffer::SharedHbm, Dtype::F32, 1, f);
    let permute = |g| on(g, &instr("collective_permute_implicit", Unit::Collective, vec![hbm(65536)], vec![hbm(65536)]));
    let bytes = 65536.0 * 4.0;
    assert_eq!(permute(Generation::Trn2).bytes, bytes);
    assert_ns(permute(Generation::Trn2).busy_ns, 1300.0 + bytes / 160.0);
    assert_ns(permute(Generation::Trn1).busy_ns, 1300.0 + bytes / 192.0);
    assert_ns(permute(Generation::Trn3).busy_ns, 1300.0 + bytes / 320.0);
    let reg = instr("nisa.register_move", Unit::Sync, vec![], vec![]);
    assert_ns(on(Generation::Trn2, &reg).busy_ns, 64.0 / 1.2);
}

/// The hand-off between units: none between matmuls (one in-order pipeline), 200
/// cycles of the producer between compute engines, the DMA latency to and from DMA.
#[test]
fn dependency_latencies() {
    let c = Costs::of(Target::Trn2);
    assert_eq!(c.dependency_ns(Unit::Tensor, Unit::Tensor), 0.0);
    assert_ns(c.dependency_ns(Unit::Tensor, Unit::Vector), 200.0 / 2.4);
    assert_ns(c.dependency_ns(Unit::Vector, Unit::Scalar), 200.0 / 0.96);
    assert_ns(c.dependency_ns(Unit::Dma, Unit::Tensor), 1300.0);
    assert_ns(c.dependency_ns(Unit::Scalar, Unit::Dma), 1300.0);
}

/// A dependent chain of one-element activations issues every 264 Scalar Engine
/// cycles: the interval the perf guide measured on trn1 (189 ns).
#[test]
fn dependent_activations_follow_the_measured_interval() {
    const CHAIN: usize = 50;
    let launch = Launch::new().profile(Target::Trn1);
    launch
        .run(|ctx| {
            let t = alloc(ctx, &[1, 1], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &t, 1.0, Default::default())?;
            for _ in 0..CHAIN {
                nisa::activation(ctx, &t, nl::NlOp::Exp, &t, ActivationOpts::default())?;
            }
            Ok(())
        })
        .unwrap();
    let p = launch.profiled().unwrap();
    let acts: Vec<_> = p.timeline.slices[0].iter().filter(|s| s.op == "nisa.activation").collect();
    assert_eq!(acts.len(), CHAIN);
    let interval = (acts[CHAIN - 1].start_ns - acts[0].start_ns) / (CHAIN - 1) as f64;
    assert_ns(interval, 264.0 / 1.4);
    assert!((interval - 189.0).abs() < 2.0, "{interval}");
}

/// A DMA of a `[128, 512]` fp32 tile into SBUF, then an activation of it: the DMA
/// takes 256 KiB / (16 · 23 B/ns · 2048/2176) = 756.9 ns; the activation starts
/// 1.3 µs (DMA latency) after it and takes 512 cycles at 1.2 GHz. The trace holds
/// one track per unit, with those durations in microseconds.
#[test]
fn two_instruction_kernel_schedule_and_trace() {
    let launch = Launch::new().profile(Target::Trn2);
    let input = hbm(&[128, 512], &vec![0.5; 128 * 512], Dtype::F32);
    launch
        .run(|ctx| {
            let t = alloc(ctx, &[128, 512], Dtype::F32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &t, &input, Default::default())?;
            let u = alloc(ctx, &[128, 512], Dtype::F32, Buffer::Sbuf)?;
            nisa::activation(ctx, &u, nl::NlOp::Exp, &t, ActivationOpts::default())
        })
        .unwrap();
    let p = launch.profiled().unwrap();
    // The engines are busy for the bytes; the transfer takes the fixed 850 ns
    // of a 2 KiB-per-partition transfer (the DMA curve's flat part).
    let dma_ns = 262144.0 / (16.0 * 23.0 * (2048.0 / 2176.0));
    let dma_done = 850.0;
    assert!(dma_ns < dma_done);
    let act_ns = 512.0 / 1.2;
    let s = &p.timeline.slices[0];
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].unit, s[1].unit), (Unit::Dma, Unit::Scalar));
    assert_ns(s[0].start_ns, 0.0);
    assert_ns(s[0].end_ns, dma_done);
    assert_ns(s[1].start_ns, dma_done + 1300.0);
    assert_ns(s[1].end_ns, dma_done + 1300.0 + act_ns);
    let total = dma_done + 1300.0 + act_ns;
    assert_ns(p.report.estimated_seconds * 1e9, total);
    assert!((p.report.busy(Unit::Dma) - dma_ns / total).abs() < 1e-12);
    assert!((p.report.busy(Unit::Scalar) - act_ns / total).abs() < 1e-12);
    assert_eq!(p.report.critical_path.len(), 2);
    assert_eq!(p.report.sbuf_peak_bytes, 2 * 512 * 4);

    // The trace: valid trace-event JSON, two named tracks, two complete events.
    let trace: Value = serde_json::from_str(&p.trace_json()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(ph == "X" || ph == "M", "{e}");
        assert!(e["pid"].is_u64() && e["name"].is_string(), "{e}");
        if ph == "X" {
            assert!(e["tid"].is_u64() && e["ts"].is_number() && e["dur"].is_number(), "{e}");
        }
    }
    let names: Vec<&str> = events.iter().filter(|e| e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["lnc0 scalar", "lnc0 dma"]);
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), 2);
    let (dma, act) = (complete[0], complete[1]);
    assert_eq!(dma["name"], "nisa.dma_copy");
    assert_ne!(dma["tid"], act["tid"]);
    let us = |v: &Value| v.as_f64().unwrap();
    assert!((us(&dma["dur"]) - dma_done * 1e-3).abs() < 1e-9);
    assert!((us(&act["ts"]) - (dma_done + 1300.0) * 1e-3).abs() < 1e-9);
    assert!((us(&act["dur"]) - act_ns * 1e-3).abs() < 1e-9);
    assert_eq!(dma["args"]["bytes"], 262144.0);
}

/// The compiler schedules the unrolled stream: an independent Vector Engine
/// instruction fills the hand-off wait of a dependent one before it, and one
/// that touches bytes an earlier one reads does not move ahead of it. On trn2 a
/// `[128, 512]` fp32 `tensor_tensor` from SBUF takes 2·512 cycles at 0.96 GHz,
/// and a dependent one may start 200 cycles after its producer ends.
#[test]
fn independent_instructions_fill_a_dependent_ones_wait() {
    let launch = Launch::new().profile(Target::Trn2);
    launch
        .run(|ctx| {
            let tile = || alloc(ctx, &[128, 512], Dtype::F32, Buffer::Sbuf);
            let (x, y, u, v, w) = (tile()?, tile()?, tile()?, tile()?, tile()?);
            nisa::memset(ctx, &x, 1.0, Default::default())?;
            nisa::memset(ctx, &y, 2.0, Default::default())?;
            let tt = |d: &Tensor, a: &Tensor, b: &Tensor| nisa::tensor_tensor(ctx, d, a, b, nl::NlOp::Multiply, Default::default());
            tt(&u, &x, &y)?; // a
            tt(&v, &u, &y)?; // b: reads a's result
            tt(&w, &x, &y)?; // c: independent of a and b
            tt(&u, &w, &y) // d: overwrites u, which b reads
        })
        .unwrap();
    let p = launch.profiled().unwrap();
    let tts: Vec<_> = p.timeline.slices[0].iter().filter(|s| s.op == "nisa.tensor_tensor").collect();
    assert_eq!(tts.len(), 4);
    let [a, b, c, d] = [0, 1, 2, 3].map(|k| tts[k]);
    assert!(a.index < b.index && b.index < c.index && c.index < d.index, "slices in program order");
    let instr_ns = 2.0 * 512.0 / 0.96;
    assert_ns(a.end_ns - a.start_ns, instr_ns);
    // b could start 200 cycles after a; c, ready earlier, runs first, then b.
    assert_ns(c.start_ns, a.end_ns);
    assert_ns(b.start_ns, c.end_ns);
    assert!(b.start_ns > a.end_ns + 200.0 / 0.96, "b did not wait for c");
    // d waits for b's read of u.
    assert!(d.start_ns >= b.end_ns, "d at {} ns before b ends at {} ns", d.start_ns, b.end_ns);
}

/// Programs of an LNC pair get tracks of their own, and a core barrier makes the
/// faster program wait for the slower one.
#[test]
fn core_barrier_waits_for_the_slower_program() {
    let launch = Launch::new().lnc(2).profile(Target::Trn2);
    launch
        .run(|ctx| {
            let t = alloc(ctx, &[128, 2048], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &t, 1.0, Default::default())?;
            if ctx.program_id() == 1 {
                nisa::activation(ctx, &t, nl::NlOp::Exp, &t, ActivationOpts::default())?;
            }
            let flag = alloc(ctx, &[1, 1], Dtype::F32, Buffer::SharedHbm)?;
            nisa::core_barrier(ctx, &flag, &[0, 1], Default::default())?;
            nisa::memset(ctx, &t, 2.0, Default::default())
        })
        .unwrap();
    let p = launch.profiled().unwrap();
    assert_eq!(p.report.cores, 2);
    let barrier = |prog: usize| p.timeline.slices[prog].iter().find(|s| s.op == "nisa.core_barrier").unwrap().start_ns;
    assert_ns(barrier(0), barrier(1));
    let act_end = p.timeline.slices[1].iter().find(|s| s.op == "nisa.activation").unwrap().end_ns;
    assert!(barrier(0) >= act_end);
    let trace: Value = serde_json::from_str(&p.trace_json()).unwrap();
    let tracks: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(tracks.contains(&"lnc0 vector") && tracks.contains(&"lnc1 scalar") && tracks.contains(&"lnc1 sync"), "{tracks:?}");
}

/// Asking for a profile without profiling, or before a run, is an error.
#[test]
fn profile_needs_a_profiled_run() {
    let e = expect_err(Launch::new().profiled());
    assert_err(&e, nki_core::ErrorKind::Argument, &["Launch::profile"]);
    let e = expect_err(Launch::new().profile(Target::Trn3).profiled());
    assert_err(&e, nki_core::ErrorKind::Argument, &["run the profiled launch"]);
}
