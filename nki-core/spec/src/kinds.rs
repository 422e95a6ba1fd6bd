//! What a parameter takes: memory spaces, operator classes, value kinds.

/// Which memory spaces a tensor parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spaces {
    /// SBUF or PSUM (compute engines).
    OnChip,
    /// SBUF only.
    Sbuf,
    /// PSUM only.
    Psum,
    /// HBM or SBUF (DMA).
    Dma,
    /// Shared HBM, or an SBUF tile each program keeps for itself: the data a
    /// core barrier meets on. The docs name shared HBM; the library's hybrid MoE
    /// meets on its SBUF block counter too, and runs on hardware, where the
    /// barrier then only synchronises the programs.
    SharedHbmOrSbuf,
    /// Any.
    Any,
}

/// The memory a tensor lives in, as the rules of [`Spaces`] see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// The state buffer.
    Sbuf,
    /// The matmul accumulation buffer.
    Psum,
    /// HBM private to one program (`nl.hbm`, `nl.private_hbm`).
    PrivateHbm,
    /// HBM shared by the programs of a launch (`nl.shared_hbm`).
    SharedHbm,
}

impl Spaces {
    /// Whether a tensor in `memory` may be passed.
    pub const fn admits(self, memory: Memory) -> bool {
        match self {
            Spaces::OnChip => matches!(memory, Memory::Sbuf | Memory::Psum),
            Spaces::Sbuf => matches!(memory, Memory::Sbuf),
            Spaces::Psum => matches!(memory, Memory::Psum),
            Spaces::Dma => !matches!(memory, Memory::Psum),
            Spaces::SharedHbmOrSbuf => matches!(memory, Memory::SharedHbm | Memory::Sbuf),
            Spaces::Any => true,
        }
    }

    /// The rule a tensor [`Spaces::admits`] refuses breaks, completing "`data` ...".
    pub const fn requirement(self) -> &'static str {
        match self {
            Spaces::OnChip => "must be in SBUF or PSUM",
            Spaces::Sbuf => "must be in SBUF",
            Spaces::Psum => "must be in PSUM",
            Spaces::Dma => "cannot be in PSUM",
            Spaces::SharedHbmOrSbuf => "must be a shared_hbm tensor or an SBUF tile",
            Spaces::Any => "may be in any memory",
        }
    }
}

/// The class of operator token a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// Two-operand ALU ops (`nl.add`, `nl.less`, ...).
    Alu,
    /// Activation functions (`nl.exp`, `nl.copy`, ...).
    Act,
    /// Either (e.g. `tensor_scalar`'s `op0` also takes unary ops).
    Any,
    /// An op combining data with a scalar operand: a two-operand ALU op, or one of
    /// the ALU table's unary ops (`ALU_UNARY_TOKENS`), whose operand must be `None` or 0.
    AluScalar,
}

/// How a parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A tensor in one of the given memory spaces.
    Tensor(Spaces),
    /// A scalar or a `(P, 1)` tensor.
    Operand,
    /// An operator token of the given class.
    Op(OpClass),
    /// An integer.
    Int,
    /// A float.
    Float,
    /// A bool.
    Bool,
    /// `Option<bool>` (`accumulate=`): `None`, a bool, or an `Option<bool>` value.
    OptBool,
    /// An `nl` dtype.
    Dtype,
    /// An `nl` memory region.
    Buffer,
    /// A string.
    Str,
    /// `[[step, count], ...]`.
    Pattern,
    /// A list of integers (shape, mask, cores).
    Ints,
    /// A list of numbers (`dma_compute`'s scales).
    Floats,
    /// A number or a rectangular nested list of number literals (`nl.shared_constant`).
    Constant,
    /// An integer or a tuple of integers.
    Axis,
    /// A member of an `nisa` enum (`"engine"`, `"reduce_cmd"`, ...).
    Enum(&'static str),
    /// `(int, int)`.
    Pair,
    /// A register or an integer.
    RegisterSource,
    /// A register or a one-element SBUF tensor (`.ap(scalar_offset=)`).
    DynamicOffset,
    /// A virtual register.
    Register,
    /// An `ncc.ReplicaGroup`.
    ReplicaGroup,
    /// Replica group rings (`((0, 1), (2, 3))`).
    Groups,
    /// Per channel, a list of one tensor: `[[t]]`.
    TensorLists,
    /// A list of tensors.
    Tensors,
    /// Dim names, one per dim, a dim split or merged as a group of names
    /// (`("b", ("h", "w"))`): an einops-style pattern, written as a literal.
    Names,
    /// Sizes of dim names, `[("h", 4)]` (a Python dict).
    Sizes,
    /// A Python callable (loop bodies).
    Callable,
    /// A value whose kind nki-rs has not settled: the parameter is official but
    /// not supported yet, and a call passing it is rejected.
    Planned,
}

/// A parameter of an op, named and ordered as in the official signature.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// The official keyword name.
    pub name: &'static str,
    /// What it takes.
    pub kind: Kind,
    /// Whether a call must pass it.
    pub required: bool,
    /// An optional parameter's official default, as NKI writes it (`engine.unknown`,
    /// `None`, `0`); `""` for a required parameter.
    pub default: &'static str,
}

impl Param {
    /// A required parameter.
    pub const fn req(name: &'static str, kind: Kind) -> Param {
        Param { name, kind, required: true, default: "" }
    }

    /// An optional parameter.
    pub const fn opt(name: &'static str, kind: Kind) -> Param {
        Param { name, kind, required: false, default: "" }
    }

    /// The parameter with its official default.
    pub const fn defaults_to(self, default: &'static str) -> Param {
        Param { default, ..self }
    }
}

/// What a call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    /// Nothing (the op writes `dst`).
    Unit,
    /// An integer.
    Int,
    /// A bool.
    Bool,
    /// A virtual register.
    Register,
    /// An `ncc.ReplicaGroup`.
    ReplicaGroup,
    /// Computed by the op's rule (e.g. `nl.ndarray`, `nl.ds`).
    Custom,
}
