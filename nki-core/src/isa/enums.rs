//! The enums of `nki.isa`: engines, reduce commands, DMA modes, matmul modes.
#![allow(non_upper_case_globals)]

pub use nki_spec::Engine;

/// `nisa.reduce_cmd`: how an instruction updates its engine's accumulator registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceCmd {
    /// Leave the registers alone.
    Idle,
    /// Reset the registers to the reduction's identity (0 for add) without folding
    /// in this instruction's values.
    Reset,
    /// Fold this instruction's values into the registers.
    Reduce,
    /// Reset, then fold in this instruction's values.
    ResetReduce,
    /// Load `reduce_init`, then fold in this instruction's values.
    LoadReduce,
}

/// `nisa.dge_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)]
pub enum DgeMode {
    #[default]
    Unknown,
    Swdge,
    Hwdge,
    None,
}

/// `nisa.dma_engine`: the DMA queue that carries a `sendrecv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)]
pub enum DmaEngine {
    #[default]
    Dma,
    GpsimdDma,
}

/// `nisa.oob_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)]
pub enum OobMode {
    #[default]
    Error,
    Skip,
}

/// `nisa.matmul_perf_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)]
pub enum MatmulPerfMode {
    #[default]
    None,
    DoubleRow,
}

/// `nisa.engine.*` members.
pub mod engine {
    use super::Engine;
    /// Tensor Engine (PE array).
    pub const tensor: Engine = Engine::Tensor;
    /// Vector Engine.
    pub const vector: Engine = Engine::Vector;
    /// Scalar (activation) Engine.
    pub const scalar: Engine = Engine::Scalar;
    /// GpSimd Engine.
    pub const gpsimd: Engine = Engine::Gpsimd;
    /// DMA.
    pub const dma: Engine = Engine::Dma;
    /// Sync Engine.
    pub const sync: Engine = Engine::Sync;
    /// Let the compiler choose.
    pub const unknown: Engine = Engine::Unknown;
}

/// `nisa.reduce_cmd.*` members.
pub mod reduce_cmd {
    use super::ReduceCmd;
    /// See [`ReduceCmd::Idle`].
    pub const idle: ReduceCmd = ReduceCmd::Idle;
    /// See [`ReduceCmd::Reset`].
    pub const reset: ReduceCmd = ReduceCmd::Reset;
    /// See [`ReduceCmd::Reduce`].
    pub const reduce: ReduceCmd = ReduceCmd::Reduce;
    /// See [`ReduceCmd::ResetReduce`].
    pub const reset_reduce: ReduceCmd = ReduceCmd::ResetReduce;
    /// See [`ReduceCmd::LoadReduce`].
    pub const load_reduce: ReduceCmd = ReduceCmd::LoadReduce;
}

/// `nisa.dge_mode.*` members.
pub mod dge_mode {
    use super::DgeMode;
    /// Compiler's choice.
    pub const unknown: DgeMode = DgeMode::Unknown;
    /// Software descriptor generation (GpSimd).
    pub const swdge: DgeMode = DgeMode::Swdge;
    /// Hardware descriptor generation: raw bytes, no dtype cast.
    pub const hwdge: DgeMode = DgeMode::Hwdge;
    /// Host-generated descriptors.
    pub const none: DgeMode = DgeMode::None;
}

/// `nisa.dma_engine.*` members.
pub mod dma_engine {
    use super::DmaEngine;
    /// The hardware DMA queues (default).
    pub const dma: DmaEngine = DmaEngine::Dma;
    /// DMA issued by the GpSimd engine: at most 1 KiB per partition.
    pub const gpsimd_dma: DmaEngine = DmaEngine::GpsimdDma;
}

/// `nisa.oob_mode.*` members.
pub mod oob_mode {
    use super::OobMode;
    /// Out-of-bounds dynamic accesses raise an error.
    pub const error: OobMode = OobMode::Error;
    /// Out-of-bounds dynamic accesses are skipped.
    pub const skip: OobMode = OobMode::Skip;
}

/// `nisa.matmul_perf_mode.*` members.
pub mod matmul_perf_mode {
    use super::MatmulPerfMode;
    /// Default.
    pub const none: MatmulPerfMode = MatmulPerfMode::None;
    /// Two fp8 rows per partition.
    pub const double_row: MatmulPerfMode = MatmulPerfMode::DoubleRow;
}

/// `nisa.nc_version.*` members: NeuronCore versions, comparable as integers.
pub mod nc_version {
    /// Trainium1 / Inferentia2.
    pub const gen2: i64 = 2;
    /// Trainium2.
    pub const gen3: i64 = 3;
    /// Trainium3.
    pub const gen4: i64 = 4;
}
