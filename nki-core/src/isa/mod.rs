//! `nki.isa` (`nisa`): the NeuronCore instructions with CPU semantics.
//!
//! Every op takes the program's [`Ctx`](crate::emulator::Ctx), its required
//! arguments in NKI order, and an options struct for NKI's keyword arguments.
//! Each op checks its hardware rules (memory spaces, partition and free sizes,
//! dtypes, generation) and returns an error naming the op, the tensor and the limit.

mod activate2;
mod activation;
mod alu;
mod cumulative;
mod dma;
mod dma_compute;
mod elementwise;
mod enums;
mod exec;
mod exponential;
mod gather;
mod matmul;
mod mx;
mod nonzero;
mod operand;
mod partition_reduce;
mod predicated;
mod random;
mod reduce;
mod scan;
mod select;
mod select_reduce;
mod sendrecv;
mod sequence_bounds;
mod shuffle;
mod stats;
mod sync;
mod tile;
mod top8;
mod topk;
mod xorwow;

/// The instructions whose emulation writes every cell of each destination it
/// records from its sources alone, never reading what the destination held
/// (`nc_matmul` adds only onto cells a matmul wrote since the tile's
/// allocation). A tile that starts in a reused buffer
/// (`tensor::unwritten`) then needs no zeroing of the cells they write;
/// any other instruction gets its destinations' unwritten cells zeroed first.
pub(crate) const OVERWRITES: &[&str] = &[
    "nisa.activation",
    "nisa.activation_reduce",
    "nisa.affine_select",
    "nisa.dma_copy",
    "nisa.dma_transpose",
    "nisa.exponential",
    "nisa.iota",
    "nisa.memset",
    "nisa.nc_matmul",
    "nisa.nc_transpose",
    "nisa.range_select",
    "nisa.reciprocal",
    "nisa.scalar_tensor_tensor",
    "nisa.tensor_copy",
    "nisa.tensor_reduce",
    "nisa.tensor_scalar",
    "nisa.tensor_scalar_reduce",
    "nisa.tensor_tensor",
];

pub use activate2::{Activate2Opts, activate2};
pub use activation::{ActivationOpts, ActivationReduceOpts, activation, activation_reduce};
pub use cumulative::{TensorScalarCumulativeOpts, tensor_scalar_cumulative};
pub use dma::{DmaCopyOpts, DmaTransposeOpts, dma_copy, dma_transpose, transpose_rules};
pub use dma_compute::{DmaComputeOpts, dma_compute};
pub use elementwise::{
    EngineOpts, NameOpts, ScalarTensorTensorOpts, TensorScalarOpts, memset, reciprocal, scalar_tensor_tensor, tensor_copy, tensor_scalar,
    tensor_tensor,
};
pub use enums::{
    DgeMode, DmaEngine, Engine, MatmulPerfMode, OobMode, ReduceCmd, dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode,
    reduce_cmd,
};
pub use exponential::{ExponentialOpts, exponential};
pub use gather::{LocalGatherOpts, local_gather, nc_n_gather};
pub use matmul::{NcMatmulOpts, NcTransposeOpts, nc_matmul, nc_transpose};
pub use mx::{NcMatmulMxOpts, nc_matmul_mx, quantize_mx};
pub use nonzero::{NonzeroOpts, nonzero_with_count};
pub use operand::{AsOperand, Operand};
pub use partition_reduce::tensor_partition_reduce;
pub use predicated::{CopyPredicatedOpts, tensor_copy_predicated};
pub(crate) use random::{RngState, dropout_into, fill_uniform, seed_vector_from};
pub use random::{dropout, rand_get_state, rand_set_state, rand2, rng, set_rng_seed};
pub(crate) use reduce::Accumulators;
pub use reduce::{TensorReduceOpts, TensorScalarReduceOpts, tensor_reduce, tensor_scalar_reduce};
pub use scan::{TensorTensorScanOpts, tensor_tensor_scan};
pub use select::{AffineSelectOpts, FLOAT32_MIN, IotaOpts, RangeSelectOpts, affine_select, iota, range_select};
pub use select_reduce::{SelectReduceOpts, select_reduce};
pub use sendrecv::{SendrecvOpts, sendrecv};
pub use sequence_bounds::sequence_bounds;
pub use shuffle::{ShuffleOpts, nc_stream_shuffle};
pub use stats::{bn_aggr, bn_stats};
pub use sync::{
    CoreBarrierOpts, DynamicOffset, Register, RegisterSource, core_barrier, get_nc_sub_version, get_nc_version, register_alloc,
    register_load, register_move, register_store,
};
pub use top8::{MatchReplace8Opts, max8, nc_find_index8, nc_match_replace8};
pub use topk::topk;
