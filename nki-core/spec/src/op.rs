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

/// A NeuronCore engine that executes an op: the `nisa.engine` members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
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
    /// `nisa.engine.unknown`: the compiler chooses (never an op row's engine).
    #[default]
    Unknown,
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
            Engine::Unknown => "unknown",
        }
    }
}

/// The family of an `nki.isa` op: ops that share a file stem in every layer,
/// `nki-macros/src/check/rules/<stem>.rs` (static rules), `nki-core/src/isa/<stem>.rs`
/// (emulation) and `fake_nki/isa/<stem>.py` (executor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `activation`, `activation_reduce`.
    Activation,
    /// `activate2`.
    Activate2,
    /// `exponential`.
    Exponential,
    /// `tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`, `tensor_copy`, `memset`, `reciprocal`.
    Elementwise,
    /// `tensor_reduce`, `tensor_scalar_reduce`.
    Reduce,
    /// `tensor_scalar_cumulative`.
    Cumulative,
    /// `tensor_tensor_scan`.
    Scan,
    /// `tensor_partition_reduce`.
    PartitionReduce,
    /// `nc_matmul`, `nc_transpose`.
    Matmul,
    /// `nc_matmul_mx`, `quantize_mx`.
    Mx,
    /// `dma_copy`, `dma_transpose`.
    Dma,
    /// `dma_compute`.
    DmaCompute,
    /// `sendrecv`.
    Sendrecv,
    /// `affine_select`, `range_select`, `iota`.
    Select,
    /// `select_reduce`.
    SelectReduce,
    /// `tensor_copy_predicated`.
    Predicated,
    /// `nc_n_gather`, `local_gather`.
    Gather,
    /// `nonzero_with_count`.
    Nonzero,
    /// `sequence_bounds`.
    SequenceBounds,
    /// `rng`, `rand2`, `dropout`, `set_rng_seed`, `rand_get_state`, `rand_set_state`.
    Random,
    /// `bn_stats`, `bn_aggr`.
    Stats,
    /// `max8`, `nc_find_index8`, `nc_match_replace8`.
    Top8,
    /// `topk`.
    Topk,
    /// `nc_stream_shuffle`.
    Shuffle,
    /// `core_barrier`, the register ops, `get_nc_version`, `get_nc_sub_version`.
    Sync,
}

impl Family {
    /// Every family.
    pub const ALL: &'static [Family] = &[
        Family::Activation,
        Family::Activate2,
        Family::Exponential,
        Family::Elementwise,
        Family::Reduce,
        Family::Cumulative,
        Family::Scan,
        Family::PartitionReduce,
        Family::Matmul,
        Family::Mx,
        Family::Dma,
        Family::DmaCompute,
        Family::Sendrecv,
        Family::Select,
        Family::SelectReduce,
        Family::Predicated,
        Family::Gather,
        Family::Nonzero,
        Family::SequenceBounds,
        Family::Random,
        Family::Stats,
        Family::Top8,
        Family::Topk,
        Family::Shuffle,
        Family::Sync,
    ];

    /// The file stem the family has in every layer.
    pub const fn stem(self) -> &'static str {
        match self {
            Family::Activation => "activation",
            Family::Activate2 => "activate2",
            Family::Exponential => "exponential",
            Family::Elementwise => "elementwise",
            Family::Reduce => "reduce",
            Family::Cumulative => "cumulative",
            Family::Scan => "scan",
            Family::PartitionReduce => "partition_reduce",
            Family::Matmul => "matmul",
            Family::Mx => "mx",
            Family::Dma => "dma",
            Family::DmaCompute => "dma_compute",
            Family::Sendrecv => "sendrecv",
            Family::Select => "select",
            Family::SelectReduce => "select_reduce",
            Family::Predicated => "predicated",
            Family::Gather => "gather",
            Family::Nonzero => "nonzero",
            Family::SequenceBounds => "sequence_bounds",
            Family::Random => "random",
            Family::Stats => "stats",
            Family::Top8 => "top8",
            Family::Topk => "topk",
            Family::Shuffle => "shuffle",
            Family::Sync => "sync",
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
    /// Whether the options struct takes `var`, the kernel variable a call's
    /// result is bound to (`let acc = nl.ndarray(..)`), which names the tensor
    /// in run-time messages when `name=` is absent.
    pub var: bool,
}

impl Binding {
    /// A fallible op taking the program context, returning nothing, called with keywords.
    pub const BASE: Binding =
        Binding { rt: "", opts: "", returns: Returns::Unit, ctx: true, fallible: true, positional: false, property: false, var: false };
}

/// A documented rule that an op does not cast: its output keeps an input's dtype.
#[derive(Clone, Copy, Debug)]
pub struct SameDtype {
    /// The output parameter (`dst`).
    pub dst: &'static str,
    /// The input parameter whose dtype it keeps (`data`).
    pub src: &'static str,
    /// The bool parameter that must be `True` for the rule to apply
    /// (`nc_matmul`'s `is_transpose`), or `None`: always.
    pub when: Option<&'static str>,
}

impl SameDtype {
    /// The rule in words (`dst must have the dtype of data: the op does not cast`).
    pub fn text(&self) -> String {
        let when = self.when.map_or(String::new(), |w| format!("with {w}, "));
        format!("{when}{} must have the dtype of {}: the op does not cast", self.dst, self.src)
    }

    /// The one message a call breaking the rule gets, after the op's name, from
    /// the macro and the emulator alike: `dst` names the output tensor, then the
    /// two dtypes as `nl` names.
    pub fn message(&self, dst: &str, dst_dtype: &str, src_dtype: &str) -> String {
        format!("{} {dst} is {dst_dtype} but {} is {src_dtype}; {}", self.dst, self.src, self.text())
    }
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
    /// Its family (`nki.isa` ops only).
    pub family: Option<Family>,
    /// Its static rule, if any.
    pub rule: Option<Rule>,
    /// The output that keeps an input's dtype, if the docs require it; the
    /// macro checks it when both dtypes are known, the emulator always.
    pub same_dtype: Option<SameDtype>,
    /// Whether nki-rs implements it.
    pub status: Status,
    /// The documented rules beyond the parameter kinds and [`Op::same_dtype`]
    /// that nki-rs enforces, in words (`nki ops NAME` prints them).
    pub rules: &'static [&'static str],
    /// A short example call in the Rust DSL (`""`: the required parameters by name).
    pub example: &'static str,
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
