//! The static hardware rules of individual ops, checked whenever the shapes,
//! memory spaces or constants involved are known at compile time. Whatever is not
//! known here is checked by the emulator at run time.
//!
//! One file per `nki.isa` op family, named as the family's emulation
//! (`nki-core/src/isa/<family>.rs`) and executor (`fake_nki/isa/<family>.py`);
//! `nl_*.rs` and `collectives.rs` hold the rules of `nki.language` and
//! `nki.collectives` calls. This module only dispatches: the family files import
//! the checker's machinery (`check::site`, `check::types`, `check::operands`),
//! never this module.

mod activate2;
mod collectives;
mod dma;
mod dma_compute;
mod elementwise;
mod gather;
mod matmul;
mod mx;
mod nl_memory;
mod nl_tiles;
mod nonzero;
mod partition_reduce;
mod predicated;
mod random;
mod reduce;
mod scan;
mod select;
mod select_reduce;
mod sendrecv;
mod sequence_bounds;
mod stats;
mod top8;
mod topk;

use super::site::Check;
use super::{constant, operands};
use nki_spec::Rule;

/// The check a spec row's rule id names.
pub fn rule(r: Rule) -> Check {
    match r {
        Rule::DmaCopy => dma::dma_copy,
        Rule::DmaTranspose => dma::check,
        Rule::DmaCompute => dma_compute::check,
        Rule::Sendrecv => sendrecv::check,
        Rule::SameTileDstSrc => operands::same_tile_dst_src,
        Rule::SameTileDstData => operands::same_tile_dst_data,
        Rule::NcMatmul => matmul::nc_matmul,
        Rule::NcTranspose => matmul::nc_transpose,
        Rule::TensorTensor => elementwise::tensor_tensor,
        Rule::TensorReduce => reduce::tensor_reduce,
        Rule::AffineSelect => select::affine_select,
        Rule::RangeSelect => select::range_select,
        Rule::Ndarray => nl_memory::ndarray,
        Rule::BnStats => stats::bn_stats,
        Rule::BnAggr => stats::bn_aggr,
        Rule::Ds => nl_memory::ds,
        Rule::Max8 => top8::max8,
        Rule::FindIndex8 => top8::find_index8,
        Rule::MatchReplace8 => top8::match_replace8,
        Rule::TensorTensorScan => scan::tensor_tensor_scan,
        Rule::PartitionReduce => partition_reduce::check,
        Rule::Topk => topk::check,
        Rule::Activate2 => activate2::check,
        Rule::QuantizeMx => mx::quantize,
        Rule::MatmulMx => mx::matmul,
        Rule::CopyPredicated => predicated::copy_predicated,
        Rule::SelectReduce => select_reduce::select_reduce,
        Rule::Nonzero => nonzero::nonzero_with_count,
        Rule::NGather => gather::nc_n_gather,
        Rule::LocalGather => gather::local_gather,
        Rule::Rng => random::rng,
        Rule::Rand2 => random::rand2,
        Rule::Dropout => random::dropout,
        Rule::SetRngSeed => random::set_rng_seed,
        Rule::RandState => random::rand_state,
        Rule::SequenceBounds => sequence_bounds::sequence_bounds,
        Rule::NlDropout => random::nl_dropout,
        Rule::Load => nl_memory::load,
        Rule::Store => nl_memory::store,
        Rule::NlElementwise => nl_tiles::elementwise,
        Rule::NlMatmul => nl_tiles::matmul,
        Rule::NlTranspose => nl_tiles::transpose,
        Rule::NlReduce => nl_tiles::reduce,
        Rule::NlWhere => nl_tiles::where_,
        Rule::NlNormalize => nl_tiles::normalize,
        Rule::NlLike => nl_tiles::like,
        Rule::NlExpandDims => nl_tiles::expand_dims,
        Rule::NlBroadcastTo => nl_tiles::broadcast_to,
        Rule::NlGatherFlattened => nl_tiles::gather_flattened,
        Rule::NlLoadTranspose2d => nl_tiles::load_transpose2d,
        Rule::NlIdentity => nl_tiles::identity,
        Rule::NlSharedConstant => constant::check,
        Rule::Collective => collectives::collective,
    }
}
