//! An op row and what it refers to.

use crate::hw::Generation;
use crate::kinds::{Param, Returns};

/// The official module an op belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    /// `nki.isa`, written `nisa` in kernels.
    Isa,
    /// `nki.language`, written `nl`.
    Language,
    /// `nki.collectives`, written `ncc`.
    Collectives,
    /// Methods and properties of `nki.language.NkiTensor`.
    Tensor,
}

impl Module {
    /// The module's name in kernels and emitted Python (`nisa`, `nl`, `ncc`; `""` for methods).
    pub const fn dsl(self) -> &'static str {
        match self {
            Module::Isa => "nisa",
            Module::Language => "nl",
            Module::Collectives => "ncc",
            Module::Tensor => "",
        }
    }

    /// The official module path (`nki.isa`, ..., `nki.language.NkiTensor`).
    pub const fn official(self) -> &'static str {
        match self {
            Module::Isa => "nki.isa",
            Module::Language => "nki.language",
            Module::Collectives => "nki.collectives",
            Module::Tensor => "nki.language.NkiTensor",
        }
    }
}

/// A NeuronCore engine that executes an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Tensor Engine (PE array).
    Tensor,
    /// Vector Engine.
    Vector,
    /// Scalar (activation) Engine.
    Scalar,
    /// GpSimd Engine.
    Gpsimd,
    /// DMA engines.
    Dma,
    /// Sync Engine.
    Sync,
}

impl Engine {
    /// The `nisa.engine` member name.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::Tensor => "tensor",
            Engine::Vector => "vector",
            Engine::Scalar => "scalar",
            Engine::Gpsimd => "gpsimd",
            Engine::Dma => "dma",
            Engine::Sync => "sync",
        }
    }
}

/// The static rule a call is checked against, resolved by the macro's checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Rule {
    DmaCopy,
    DmaTranspose,
    DmaCompute,
    Sendrecv,
    SameTileDstSrc,
    SameTileDstData,
    NcMatmul,
    NcTranspose,
    TensorTensor,
    TensorReduce,
    AffineSelect,
    RangeSelect,
    Ndarray,
    BnStats,
    BnAggr,
    Ds,
    Max8,
    FindIndex8,
    MatchReplace8,
    TensorTensorScan,
    PartitionReduce,
    Topk,
    Activate2,
    QuantizeMx,
    MatmulMx,
    CopyPredicated,
    SelectReduce,
    Nonzero,
    NGather,
    LocalGather,
    Rng,
    Rand2,
    Dropout,
    SetRngSeed,
    RandState,
    SequenceBounds,
    NlDropout,
    Load,
    Store,
    NlElementwise,
    NlMatmul,
    NlTranspose,
    NlReduce,
    NlWhere,
    NlNormalize,
    NlLike,
    NlExpandDims,
    NlBroadcastTo,
    NlGatherFlattened,
    NlLoadTranspose2d,
    NlIdentity,
    NlSharedConstant,
    Collective,
}

/// How an implemented op is called in the emulation (`::nki::<rt>`).
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    /// Runtime function, relative to `::nki` (`nisa::dma_copy`).
    pub rt: &'static str,
    /// Runtime options struct for the optional parameters, relative to `::nki`
    /// (`""`: none; optional parameters are then trailing `Option` arguments).
    pub opts: &'static str,
    /// What a call returns.
    pub returns: Returns,
    /// Whether the runtime function takes the program context.
    pub ctx: bool,
    /// Whether the runtime function returns `Result`.
    pub fallible: bool,
    /// Whether Python must receive positional arguments (classes without named fields).
    pub positional: bool,
    /// A property (`t.shape`) rather than a call.
    pub property: bool,
}

impl Binding {
    /// A fallible op taking the program context, returning nothing, called with keywords.
    pub const BASE: Binding =
        Binding { rt: "", opts: "", returns: Returns::Unit, ctx: true, fallible: true, positional: false, property: false };
}

/// Whether nki-rs implements an op.
#[derive(Clone, Copy, Debug)]
pub enum Status {
    /// Kernels may call it; this is how the emulation runs it.
    Implemented(Binding),
    /// Official, described here, not callable yet.
    Planned,
}

/// One official function or `NkiTensor` method.
#[derive(Debug)]
pub struct Op {
    /// Its module.
    pub module: Module,
    /// Its name (`bn_stats`).
    pub name: &'static str,
    /// Its Python callee in emitted source (`nisa.bn_stats`).
    pub py: &'static str,
    /// Its parameters in the official order (without `self`).
    pub params: &'static [Param],
    /// The engines that execute it (empty: trace-time or host-side).
    pub engines: &'static [Engine],
    /// The NeuronCore generations that have it.
    pub generations: &'static [Generation],
    /// What it does, in one line.
    pub summary: &'static str,
    /// Its static rule, if any.
    pub rule: Option<Rule>,
    /// Whether nki-rs implements it.
    pub status: Status,
}

impl Op {
    /// The official path (`nki.isa.bn_stats`, `nki.language.NkiTensor.permute`).
    pub fn official_name(&self) -> String {
        format!("{}.{}", self.module.official(), self.name)
    }

    /// How the emulation runs it, when implemented.
    pub const fn binding(&self) -> Option<&Binding> {
        match &self.status {
            Status::Implemented(b) => Some(b),
            Status::Planned => None,
        }
    }

    /// The optional parameters, which an options struct holds.
    pub fn optional_params(&self) -> impl Iterator<Item = &'static Param> + use<> {
        self.params.iter().filter(|p| !p.required)
    }
}

/// Every generation.
pub const ALL_GENERATIONS: &[Generation] = &[Generation::Trn1, Generation::Trn2, Generation::Trn3];
/// NeuronCore-v3 and newer.
pub const TRN2_AND_NEWER: &[Generation] = &[Generation::Trn2, Generation::Trn3];
/// NeuronCore-v4 only.
pub const TRN3_ONLY: &[Generation] = &[Generation::Trn3];
