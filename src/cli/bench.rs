//! `nki bench`: emulator throughput of the attention kernels, and the ring's
//! overhead over one worker.

use clap::Args;
use nki::attention::cte::{CteConfig, CteInputs};
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{SeqLayout, shard};
use nki::{Dtype, Launch, Precision, Tensor};
use std::time::Instant;

/// Arguments of `nki bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Logical NeuronCore degree of the launches (2 runs the two programs of each
    /// kernel on two threads).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    lnc: u8,
    /// Runs per case; the fastest is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Only a small case, once (a smoke run).
    #[arg(long)]
    quick: bool,
}

/// Deterministic inputs in [0, 1).
fn inputs(shape: &[usize], seed: u64, dtype: Dtype) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let vals: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    Tensor::from_f32(shape, &vals, dtype).expect("shape matches")
}

/// The fastest of `reps` runs of `f`, in seconds.
fn best_of(reps: u32, f: impl Fn() -> nki::Result<()>) -> Result<f64, String> {
    let mut secs = f64::INFINITY;
    for _ in 0..reps {
        let start = Instant::now();
        f().map_err(|e| e.to_string())?;
        secs = secs.min(start.elapsed().as_secs_f64());
    }
    Ok(secs)
}

/// The fastest of `reps` timed `attention_cte` runs: seconds and GFLOP/s
/// (4·bs·S²·d flops, half when causal).
fn time_cte(bs: usize, s: usize, d: usize, causal: bool, precision: Precision, lnc: usize, reps: u32) -> Result<(f64, f64), String> {
    let dtype = if precision == Precision::Hardware { Dtype::Bf16 } else { Dtype::F32 };
    let (q, k, v) = (inputs(&[bs, s, d], 1, dtype), inputs(&[bs, d, s], 2, dtype), inputs(&[bs, s, d], 3, dtype));
    let cfg = CteConfig::new().scale(1.0 / (d as f64).sqrt()).causal_mask(causal);
    let launch = Launch::new().lnc(lnc).precision(precision);
    let secs = best_of(reps, || cfg.launch(&launch, &CteInputs::new(&q, &k, &v)).map(drop))?;
    let flops = 4.0 * (bs * s * s * d) as f64 * if causal { 0.5 } else { 1.0 };
    Ok((secs, flops / secs / 1e9))
}

/// Seconds of a `w`-rank striped causal ring forward over `st` tokens and of one
/// worker's causal `attention_cte` over the same tokens, both in fp32 mode.
fn time_ring(bh: usize, st: usize, d: usize, w: usize, lnc: usize, reps: u32) -> Result<(f64, f64), String> {
    let scale = 1.0 / (d as f64).sqrt();
    let global = |seed| inputs(&[1, bh, st, d], seed, Dtype::F32);
    let err = |e: nki::NkiError| e.to_string();
    let (q, k, v) = (global(4), global(5), global(6));
    let (qs, ks, vs) = (
        shard(&q, w, SeqLayout::Striped, true).map_err(err)?,
        shard(&k, w, SeqLayout::Striped, true).map_err(err)?,
        shard(&v, w, SeqLayout::Striped, false).map_err(err)?,
    );
    // The inputs are random: reading them as pre-scaled leaves the work unchanged.
    let ring_inputs = RingFwdInputs { q: Queries::Prescaled { q: &qs, scale }, k: &ks, v: &vs, sinks: None };
    let ring = RingFwdConfig::new(w as i64).causal(true).striped(true);
    let ring_launch = Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32);
    let ring_secs = best_of(reps, || ring.launch(&ring_launch, &ring_inputs).map(drop))?;
    let (q1, k1, v1) = (inputs(&[bh, st, d], 7, Dtype::F32), inputs(&[bh, d, st], 8, Dtype::F32), inputs(&[bh, st, d], 9, Dtype::F32));
    let single = CteConfig::new().scale(scale).causal_mask(true);
    let single_launch = Launch::new().lnc(lnc).precision(Precision::Fp32);
    let single_secs = best_of(reps, || single.launch(&single_launch, &CteInputs::new(&q1, &k1, &v1)).map(drop))?;
    Ok((ring_secs, single_secs))
}

/// Runs the benchmark table.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    let lnc = usize::from(args.lnc);
    let reps = if args.quick { 1 } else { args.reps };
    let shapes: &[(usize, usize, usize)] = if args.quick { &[(2, 1024, 128)] } else { &[(8, 2048, 128), (2, 8192, 128)] };
    println!(
        "attention_cte emulator throughput, LNC{lnc}, best of {reps} ({} threads available)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("{:<24} {:<8} {:<10} {:>9} {:>9}", "bs·h x S x d", "mask", "precision", "seconds", "GFLOP/s");
    for &(bs, s, d) in shapes {
        for causal in [false, true] {
            for precision in [Precision::Fp32, Precision::Hardware] {
                let (secs, gflops) = time_cte(bs, s, d, causal, precision, lnc, reps)?;
                let mask = if causal { "causal" } else { "full" };
                println!("{:<24} {:<8} {:<10} {:>9.3} {:>9.1}", format!("{bs} x {s} x {d}"), mask, precision.to_string(), secs, gflops);
            }
        }
    }
    let (bh, st, d, w) = if args.quick { (2, 2048, 128, 4) } else { (4, 16384, 128, 4) };
    let (ring, single) = time_ring(bh, st, d, w, lnc, reps)?;
    println!();
    println!("ring_attention_spmd_fwd over {w} workers vs one worker's attention_cte, causal, fp32, LNC{lnc}, best of {reps}");
    println!("{:<24} {:>12} {:>14} {:>7}", "b·h x S_total x d", "ring (s)", "one worker (s)", "ratio");
    println!("{:<24} {:>12.3} {:>14.3} {:>7.2}", format!("{bh} x {st} x {d}"), ring, single, ring / single);
    Ok(())
}
