//! `nki profile` for the example kernels: each takes its tensor parameters as
//! `.npy` files under the parameter's flag (`--a-t`, `--b`, `--x`), runs with
//! the launch flags of `nki run`, and writes its result to `--out` if given.

use crate::cli::output_plan::OutputPlan;
use crate::cli::run::{LaunchArgs, flag_of};
use clap::{Args, Subcommand};
use nki::examples::mamba::{mamba_v1, mamba_v2, mamba_v3};
use nki::examples::matmul::matmul;
use nki::examples::matmul_steps::{matmul_blocked, matmul_hoisted};
use nki::examples::{softmax::softmax, tensor_add::tensor_add, transpose::transpose};
use nki::io::npy::read_tensor_npy;
use nki::{Launch, Tensor};
use std::path::PathBuf;

/// Two-operand matmul inputs: `a_t` `[K, M]` and `b` `[K, N]`.
#[derive(Args)]
pub struct MatmulArgs {
    /// Left operand, transposed: `[K, M]`.
    #[arg(long)]
    a_t: PathBuf,
    /// Right operand `[K, N]`.
    #[arg(long)]
    b: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// The blocked matmul's inputs and block shape.
#[derive(Args)]
pub struct BlockedArgs {
    #[command(flatten)]
    matmul: MatmulArgs,
    /// Stationary tiles per block.
    #[arg(long, default_value_t = 2)]
    tiles_m: i64,
    /// Moving tiles per block.
    #[arg(long, default_value_t = 2)]
    tiles_n: i64,
}

/// Inputs `a` and `b` of the same shape.
#[derive(Args)]
pub struct PairArgs {
    /// First operand.
    #[arg(long)]
    a: PathBuf,
    /// Second operand.
    #[arg(long)]
    b: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// The selective scan's inputs (fp32).
#[derive(Args)]
pub struct MambaArgs {
    /// Time steps `[batch, channels, seq]`.
    #[arg(long)]
    delta: PathBuf,
    /// Input `[batch, channels, seq]`.
    #[arg(long)]
    u: PathBuf,
    /// State decay rates `[channels, state]`.
    #[arg(long)]
    a: PathBuf,
    /// Input projection `[batch, state, seq]`.
    #[arg(long)]
    b: PathBuf,
    /// Output projection `[batch, state, seq]`.
    #[arg(long)]
    c: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// Mamba v3's inputs and time tile.
#[derive(Args)]
pub struct MambaTiledArgs {
    #[command(flatten)]
    mamba: MambaArgs,
    /// Time steps per tile (a divisor of seq).
    #[arg(long, default_value_t = 512)]
    seq_tile: i64,
}

impl MambaArgs {
    fn inputs(&self) -> [(&'static str, &PathBuf); 5] {
        [("delta", &self.delta), ("u", &self.u), ("a", &self.a), ("b", &self.b), ("c", &self.c)]
    }
}

/// One input `x`.
#[derive(Args)]
pub struct UnaryArgs {
    /// The input.
    #[arg(long)]
    x: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// Launch flags and the optional output.
#[derive(Args)]
pub struct CommonArgs {
    #[command(flatten)]
    launch: LaunchArgs,
    /// Where to write the result (not written without it).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The example kernels.
#[derive(Subcommand)]
pub enum Example {
    /// Tiled matmul with K-accumulation in PSUM (the tutorial's naive step).
    Matmul(MatmulArgs),
    /// The tutorial's matmul with loads hoisted out of the accumulation loop.
    MatmulHoisted(MatmulArgs),
    /// The tutorial's matmul with blocked free dimensions.
    MatmulBlocked(BlockedArgs),
    /// The fused Mamba tutorial's v1 (state loop outside the channel tiles).
    MambaV1(MambaArgs),
    /// The fused Mamba tutorial's v2 (channel tiles outside the state loop).
    MambaV2(MambaArgs),
    /// The fused Mamba tutorial's v3 (v2 with time tiled).
    MambaV3(MambaTiledArgs),
    /// Row softmax.
    Softmax(UnaryArgs),
    /// Element-wise sum.
    TensorAdd(PairArgs),
    /// 2-D transpose.
    Transpose(UnaryArgs),
}

/// Loads the inputs (by parameter name), runs `call` on them and writes `--out`.
fn run_with(
    inputs: &[(&str, &PathBuf)],
    common: &CommonArgs,
    call: impl FnOnce(&Launch, &[Tensor]) -> nki::Result<Tensor>,
) -> Result<(), String> {
    let mut plan = OutputPlan::new();
    for (param, path) in inputs {
        plan.input(&flag_of(param), path)?;
    }
    if let Some(out) = &common.out {
        plan.output("out", out)?;
    }
    let tensors = inputs
        .iter()
        .map(|(param, path)| read_tensor_npy(path).map(|t| t.named(param)).map_err(|e| format!("--{} {e}", flag_of(param))))
        .collect::<Result<Vec<_>, _>>()?;
    let out = call(&common.launch.launch(), &tensors).map_err(|e| e.to_string())?;
    match common.out {
        Some(_) => plan.commit(&[&out]),
        None => Ok(()),
    }
}

/// Runs the chosen example kernel.
pub fn run(example: &Example) -> Result<(), String> {
    match example {
        Example::Matmul(a) => run_with(&[("a_t", &a.a_t), ("b", &a.b)], &a.common, |l, t| matmul::Call::new(&t[0], &t[1]).launch(l)),
        Example::MatmulHoisted(a) => {
            run_with(&[("a_t", &a.a_t), ("b", &a.b)], &a.common, |l, t| matmul_hoisted::Call::new(&t[0], &t[1]).launch(l))
        }
        Example::MatmulBlocked(a) => run_with(&[("a_t", &a.matmul.a_t), ("b", &a.matmul.b)], &a.matmul.common, |l, t| {
            matmul_blocked::Call::new(&t[0], &t[1], a.tiles_m, a.tiles_n).launch(l)
        }),
        Example::MambaV1(a) => run_with(&a.inputs(), &a.common, |l, t| mamba_v1::Call::new(&t[0], &t[1], &t[2], &t[3], &t[4]).launch(l)),
        Example::MambaV2(a) => run_with(&a.inputs(), &a.common, |l, t| mamba_v2::Call::new(&t[0], &t[1], &t[2], &t[3], &t[4]).launch(l)),
        Example::MambaV3(a) => run_with(&a.mamba.inputs(), &a.mamba.common, |l, t| {
            mamba_v3::Call::new(&t[0], &t[1], &t[2], &t[3], &t[4]).seq_tile(a.seq_tile).launch(l)
        }),
        Example::Softmax(a) => run_with(&[("x", &a.x)], &a.common, |l, t| softmax::Call::new(&t[0]).launch(l)),
        Example::TensorAdd(a) => run_with(&[("a", &a.a), ("b", &a.b)], &a.common, |l, t| tensor_add::Call::new(&t[0], &t[1]).launch(l)),
        Example::Transpose(a) => run_with(&[("x", &a.x)], &a.common, |l, t| transpose::Call::new(&t[0]).launch(l)),
    }
}
