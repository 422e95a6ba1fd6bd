//! The tensor-parallel projection example (`all_gather` + `reduce_scatter` over 4
//! ranks) against `x · W1 · W2` in float64, in both precision modes, and its
//! emitted NKI under the NumPy executor with ranks as threads; its profile.

use crate::common::{Arg, as_dtype, assert_close, emitted_package, matmul_t, run_numpy_ranks, tensor, uniform};
use nki::profile::{Target, Unit};
use nki::{Dtype, Launch, Precision};
use nki_examples::tp_matmul::tp_matmul;

const RANKS: usize = 4;
/// Input features.
const K: usize = 128;
/// Hidden features.
const H: usize = 512;
/// Rows.
const M: usize = 512;
/// Output features.
const N: usize = 512;

/// The whole problem in float64: `xᵀ` `[K, M]`, `W1` `[K, H]`, `W2` `[H, N]`.
struct Problem {
    x_t: Vec<f64>,
    w1: Vec<f64>,
    w2: Vec<f64>,
}

impl Problem {
    fn new(dtype: Dtype) -> Problem {
        let scale = |v: Vec<f64>, s: f64| as_dtype(&v.iter().map(|x| x * s).collect::<Vec<_>>(), dtype);
        Problem {
            x_t: scale(uniform(K * M, 81, -1.0, 1.0), 1.0),
            w1: scale(uniform(K * H, 82, -1.0, 1.0), 1.0 / (K as f64).sqrt()),
            w2: scale(uniform(H * N, 83, -1.0, 1.0), 1.0 / (H as f64).sqrt()),
        }
    }

    /// Rank `r`'s inputs: rows of `xᵀ`, columns of `W1`, rows of `W2`.
    fn shards(&self, r: usize) -> [Vec<f64>; 3] {
        let (k, h) = (K / RANKS, H / RANKS);
        let x_t = self.x_t[r * k * M..(r + 1) * k * M].to_vec();
        let w1 = (0..K).flat_map(|i| self.w1[i * H + r * h..i * H + (r + 1) * h].to_vec()).collect();
        let w2 = self.w2[r * h * N..(r + 1) * h * N].to_vec();
        [x_t, w1, w2]
    }

    /// `y = x · W1 · W2` (`[M, N]`), in float64, the hidden activations rounded
    /// to `hidden` (the kernel casts them to the weights' dtype between the matmuls).
    fn reference(&self, hidden: Dtype) -> Vec<f64> {
        let hid = matmul_t(&self.x_t, &self.w1, K, M, H);
        let hid = as_dtype(&hid, hidden);
        let mut y = vec![0.0; M * N];
        for i in 0..M {
            for j in 0..H {
                let v = hid[i * H + j];
                for c in 0..N {
                    y[i * N + c] += v * self.w2[j * N + c];
                }
            }
        }
        y
    }

    /// Rank `r`'s rows of `y`.
    fn rows_of(y: &[f64], r: usize) -> &[f64] {
        let rows = M / RANKS;
        &y[r * rows * N..(r + 1) * rows * N]
    }
}

const SHAPES: [[usize; 2]; 3] = [[K / RANKS, M], [K, H / RANKS], [H / RANKS, N]];

fn emulate(p: &Problem, dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
    let inputs: Vec<Vec<nki::Tensor>> =
        (0..RANKS).map(|r| p.shards(r).iter().zip(SHAPES).map(|(v, s)| tensor(&s, v, dtype)).collect()).collect();
    Launch::new()
        .ranks(RANKS)
        .precision(precision)
        .run_ranks(|ctx| {
            let [x_t, w1, w2] = &inputs[ctx.rank()][..] else { unreachable!("three inputs per rank") };
            tp_matmul::Call::new(x_t, w1, w2).run(ctx).map(|y| y.to_f32_vec())
        })
        .unwrap()
}

#[test]
fn every_rank_gets_its_rows_of_the_float64_product_in_both_precisions() {
    for (dtype, precision, rtol) in [(Dtype::F32, Precision::Fp32, 1e-5), (Dtype::Bf16, Precision::Hardware, 1e-3)] {
        // bf16 inputs and hidden activations are rounded in the reference too: what
        // remains is fp32 accumulation, plus a hidden value whose fp32 sum lands on
        // the other side of a bf16 rounding boundary (one bf16 step, 2^-8, on a
        // few of the 512 terms of an output).
        let p = Problem::new(dtype);
        let y = p.reference(dtype);
        for (r, got) in emulate(&p, dtype, precision).iter().enumerate() {
            assert_close(&format!("{dtype:?} rank {r}"), got, Problem::rows_of(&y, r), 1e-6, rtol);
        }
    }
}

#[test]
fn the_emitted_kernel_matches_the_emulator_under_numpy_with_ranks_as_threads() {
    let p = Problem::new(Dtype::F32);
    let args: Vec<Vec<Arg>> =
        (0..RANKS).map(|r| p.shards(r).into_iter().zip(SHAPES).map(|(v, s)| Arg::Tensor(s.to_vec(), v, Dtype::F32)).collect()).collect();
    let np = run_numpy_ranks(emitted_package(), "tp_matmul", &args, 1, "fp32");
    let emu = emulate(&p, Dtype::F32, Precision::Fp32);
    let y = p.reference(Dtype::F32);
    for r in 0..RANKS {
        let want: Vec<f64> = emu[r].iter().map(|&v| f64::from(v)).collect();
        assert_close(&format!("numpy rank {r} vs emulator"), &np[r][0], &want, 1e-6, 1e-6);
        assert_close(&format!("numpy rank {r} vs float64"), &np[r][0], Problem::rows_of(&y, r), 1e-6, 1e-5);
    }
}

#[test]
fn the_communication_log_holds_one_gather_and_one_reduce_scatter() {
    let p = Problem::new(Dtype::F32);
    let inputs: Vec<Vec<nki::Tensor>> =
        (0..RANKS).map(|r| p.shards(r).iter().zip(SHAPES).map(|(v, s)| tensor(&s, v, Dtype::F32)).collect()).collect();
    let report = Launch::new()
        .ranks(RANKS)
        .run_all(|ctx| {
            let [x_t, w1, w2] = &inputs[ctx.rank()][..] else { unreachable!("three inputs per rank") };
            tp_matmul::Call::new(x_t, w1, w2).run(ctx).map(|_| ())
        })
        .unwrap();
    let ops: Vec<(&str, Vec<usize>, u64)> = report.comm.iter().map(|e| (e.op, e.ring.clone(), e.seq)).collect();
    assert_eq!(ops, vec![("all_gather", vec![0, 1, 2, 3], 0), ("reduce_scatter", vec![0, 1, 2, 3], 1)]);
}

#[test]
fn a_profiled_launch_places_both_collectives_on_the_collective_track() {
    let p = Problem::new(Dtype::Bf16);
    let inputs: Vec<Vec<nki::Tensor>> =
        (0..RANKS).map(|r| p.shards(r).iter().zip(SHAPES).map(|(v, s)| tensor(&s, v, Dtype::Bf16)).collect()).collect();
    let launch = Launch::new().ranks(RANKS).profile(Target::Trn2);
    launch
        .run_ranks(|ctx| {
            let [x_t, w1, w2] = &inputs[ctx.rank()][..] else { unreachable!("three inputs per rank") };
            tp_matmul::Call::new(x_t, w1, w2).run(ctx).map(|_| ())
        })
        .unwrap();
    let profile = launch.profiled().unwrap();
    let ops: Vec<(&str, Unit)> = profile.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect();
    for op in ["ncc.all_gather", "ncc.reduce_scatter"] {
        assert!(ops.contains(&(op, Unit::Collective)), "{op} missing from the profile: {ops:?}");
    }
    assert!(profile.report.estimated_seconds > 0.0);
}

/// The `tp_ranks` example of `nki-examples` (a 4-rank launch with per-rank
/// inputs), compiled into this test and run as its `main` runs it.
#[path = "../../examples/examples/tp_ranks.rs"]
mod tp_ranks;

#[test]
fn the_tp_ranks_example_runs_and_matches_float64() {
    let worst = tp_ranks::run().unwrap();
    assert!(worst < 1e-3, "largest error {worst}");
    tp_ranks::main().unwrap();
}
