//! `nki bench`: emulator throughput of the attention kernels.

use clap::Args;
use nki::attention::cte::{CteConfig, CteInputs};
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

/// The fastest of `reps` timed `attention_cte` runs: seconds and GFLOP/s
/// (4·bs·S²·d flops, half when causal).
fn time_cte(bs: usize, s: usize, d: usize, causal: bool, precision: Precision, lnc: usize, reps: u32) -> Result<(f64, f64), String> {
    let dtype = if precision == Precision::Hardware { Dtype::Bf16 } else { Dtype::F32 };
    let (q, k, v) = (inputs(&[bs, s, d], 1, dtype), inputs(&[bs, d, s], 2, dtype), inputs(&[bs, s, d], 3, dtype));
    let cfg = CteConfig::new().scale(1.0 / (d as f64).sqrt()).causal_mask(causal);
    let launch = Launch::new().lnc(lnc).precision(precision);
    let mut secs = f64::INFINITY;
    for _ in 0..reps {
        let start = Instant::now();
        cfg.launch(&launch, &CteInputs::new(&q, &k, &v)).map_err(|e| e.to_string())?;
        secs = secs.min(start.elapsed().as_secs_f64());
    }
    let flops = 4.0 * (bs * s * s * d) as f64 * if causal { 0.5 } else { 1.0 };
    Ok((secs, flops / secs / 1e9))
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
    Ok(())
}
