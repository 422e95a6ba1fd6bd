//! The per-instruction cost rules against the documents: the Vector Engine's
//! performance modes (trn2 arch guide, "Vector Engine Performance Mode"),
//! `scalar_tensor_tensor` with a PSUM input, and the double-row float8 matmul
//! (trn2 arch guide, "Double FP8"), each as the ordering or ratio the documents give.

use nki::profile::{Cost, Costs, Instr, Operand, Region, Rendezvous, Target, Unit, cost};
use nki::{Buffer, Dtype};

/// An operand `[partitions, free]` of `dtype` in `buffer`, contiguous.
fn operand(buffer: Buffer, dtype: Dtype, partitions: usize, free: usize) -> Operand {
    let region = Region { storage: 1, rows: (0, partitions as isize - 1), cols: (0, free as isize - 1) };
    Operand { region, buffer, dtype, partitions, free, run_bytes: free * dtype.size_bytes() }
}

fn instr(op: &'static str, unit: Unit, reads: Vec<Operand>, writes: Vec<Operand>) -> Instr {
    Instr { op, unit, reads, writes, rendezvous: Rendezvous::None, deps: Vec::new() }
}

fn on(target: Target, i: &Instr) -> Cost {
    cost(&Costs::of(target), i)
}

/// A `[128, 4096]` Vector `op` from `src` to `dst`.
fn vector(op: &'static str, (sb, sd): (Buffer, Dtype), (db, dd): (Buffer, Dtype)) -> Instr {
    instr(op, Unit::Vector, vec![operand(sb, sd, 128, 4096)], vec![operand(db, dd, 128, 4096)])
}

#[test]
fn vector_performance_modes_follow_the_trn2_guide() {
    use Buffer::{Psum, Sbuf};
    use Dtype::{Bf16, F16, F32, Fp8E4m3};
    let base = on(Target::Trn2, &vector("nisa.tensor_scalar", (Sbuf, F32), (Sbuf, F32))).busy_ns;
    let speedup = |op, src, dst| base / on(Target::Trn2, &vector(op, src, dst)).busy_ns;
    // 4x: bf16/fp16 in and out, SBUF to SBUF, the types need not match.
    assert_eq!(speedup("nisa.tensor_scalar", (Sbuf, Bf16), (Sbuf, Bf16)), 4.0);
    assert_eq!(speedup("nisa.tensor_copy", (Sbuf, Bf16), (Sbuf, F16)), 4.0);
    // 2x: one side in PSUM.
    assert_eq!(speedup("nisa.tensor_copy", (Psum, Bf16), (Sbuf, Bf16)), 2.0);
    // bf16 to float8 runs at twice the 1x rate on trn2 (the published
    // rmsnorm_quant profile), at the full mode on trn3 (fp8 in the 512 lanes).
    assert_eq!(speedup("nisa.tensor_scalar", (Sbuf, Bf16), (Sbuf, Fp8E4m3)), 2.0);
    let trn3 = |src, dst| {
        on(Target::Trn3, &vector("nisa.tensor_scalar", (Sbuf, F32), (Sbuf, F32))).busy_ns
            / on(Target::Trn3, &vector("nisa.tensor_scalar", src, dst)).busy_ns
    };
    assert_eq!(trn3((Sbuf, Bf16), (Sbuf, Fp8E4m3)), 4.0);
    // fp32 anywhere, and trn1 (no performance mode), stay at 1x.
    assert_eq!(speedup("nisa.tensor_scalar", (Sbuf, F32), (Sbuf, Bf16)), 1.0);
    let trn1 = |dst| on(Target::Trn1, &vector("nisa.tensor_scalar", (Sbuf, Bf16), dst)).busy_ns;
    assert_eq!(trn1((Sbuf, Fp8E4m3)), trn1((Sbuf, F32)));
}

/// The library's gamma step: `scalar_tensor_tensor` over `[80, 512]` with the
/// broadcast gamma in PSUM, about 1.4 cycles per element in the published
/// profile against the ISA note's 2 when both inputs are in SBUF.
#[test]
fn scalar_tensor_tensor_with_a_psum_input_runs_faster() {
    let stt = |second: Buffer| {
        let reads = vec![operand(Buffer::Sbuf, Dtype::Bf16, 80, 512), operand(second, Dtype::F32, 80, 512)];
        instr("nisa.scalar_tensor_tensor", Unit::Vector, reads, vec![operand(Buffer::Sbuf, Dtype::Bf16, 80, 512)])
    };
    let cycles = |b, t| on(t, &stt(b)).busy_ns * Costs::of(t).vector_ghz / 512.0;
    assert!((cycles(Buffer::Psum, Target::Trn2) - 1.4).abs() < 1e-9);
    assert!((cycles(Buffer::Sbuf, Target::Trn2) - 2.0).abs() < 1e-9);
    assert!((cycles(Buffer::Psum, Target::Trn1) - 2.0).abs() < 1e-9);
}

/// A double-row float8 matmul (`[128, 2, 128]` by `[128, 2, 512]`) takes the
/// time of a bf16 `[128, 128]` by `[128, 512]` one and does twice its FLOPs:
/// twice the bf16 throughput on trn2 and trn3 (158 vs 79 TFLOPS). A plain float8
/// matmul runs at the bf16 rate, fp32 at a quarter of it.
#[test]
fn double_row_fp8_matmuls_double_the_bf16_throughput() {
    let matmul = |dtype: Dtype, pair: usize| {
        let reads = vec![operand(Buffer::Sbuf, dtype, 128, 128 * pair), operand(Buffer::Sbuf, dtype, 128, 512 * pair)];
        instr("nisa.nc_matmul", Unit::Tensor, reads, vec![operand(Buffer::Psum, Dtype::F32, 128, 512)])
    };
    for target in [Target::Trn2, Target::Trn3] {
        let rate = |c: Cost| c.flops / c.busy_ns;
        let (bf16, fp8, plain_fp8, fp32) = (
            on(target, &matmul(Dtype::Bf16, 1)),
            on(target, &matmul(Dtype::Fp8E4m3, 2)),
            on(target, &matmul(Dtype::Fp8E4m3, 1)),
            on(target, &matmul(Dtype::F32, 1)),
        );
        assert_eq!(fp8.busy_ns, bf16.busy_ns);
        assert_eq!(fp8.flops, 2.0 * bf16.flops);
        assert_eq!(rate(fp8) / rate(bf16), 2.0);
        assert_eq!(rate(plain_fp8), rate(bf16));
        assert_eq!(rate(fp32) / rate(bf16), 0.25);
        // 2 · 128 · 128 · 2.4 GHz · 2 = 157 TFLOPS, the guide's 158.
        assert!((rate(fp8) * 1e9 - 157.3e12).abs() < 0.1e12, "{}", rate(fp8));
    }
}
