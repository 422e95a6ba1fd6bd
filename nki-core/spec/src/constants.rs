//! Named values of the NKI API: dtypes, memory regions, operator tokens,
//! `nl.tile_size` and the `nisa` enums with their documented values.

/// An `nl` dtype.
#[derive(Clone, Copy, Debug)]
pub struct DtypeSpec {
    /// The `nl` name (`bfloat16`).
    pub name: &'static str,
    /// Bits per element (packed types: of the packed group).
    pub bits: u32,
    /// Whether tensors of nki-rs may hold it.
    pub implemented: bool,
}

const fn dt(name: &'static str, bits: u32, implemented: bool) -> DtypeSpec {
    DtypeSpec { name, bits, implemented }
}

/// Every dtype of `nki.language`.
pub const DTYPES: &[DtypeSpec] = &[
    dt("float32", 32, true),
    dt("bfloat16", 16, true),
    dt("float16", 16, true),
    dt("float8_e4m3", 8, true),
    dt("float8_e4m3fn", 8, true),
    dt("float8_e5m2", 8, true),
    dt("int32", 32, true),
    dt("uint32", 32, true),
    dt("int16", 16, true),
    dt("uint16", 16, true),
    dt("int8", 8, true),
    dt("uint8", 8, true),
    dt("bool_", 8, false),
    dt("tfloat32", 32, true),
    dt("float8_e5m2_x4", 32, true),
    dt("float8_e4m3fn_x4", 32, true),
    dt("float8_e8m0fnu", 8, true),
    dt("float4_e2m1fn_x4", 16, true),
];

/// The dtypes kernels may name.
pub fn implemented_dtypes() -> impl Iterator<Item = &'static str> {
    DTYPES.iter().filter(|d| d.implemented).map(|d| d.name)
}

/// Memory regions (`nl.sbuf`, ...; `hbm` is an alias of `private_hbm`).
pub const BUFFERS: &[&str] = &["sbuf", "psum", "hbm", "private_hbm", "shared_hbm"];

/// Where `nisa.core_barrier`'s `data` may be: its row's rule, which the macro
/// and the emulator check (and the executor's `isa/sync.py` states too).
pub const CORE_BARRIER_DATA: crate::Spaces = crate::Spaces::SharedHbmOrSbuf;

/// Two-operand ALU operator tokens nki-rs implements (`op=nl.add`).
pub const ALU_TOKENS: &[&str] = &[
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "power",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "abs_max",
    "abs_min",
    "fmod",
    "mod",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "left_shift",
    "right_shift",
    "average",
    "bypass",
];

/// Activation-function tokens nki-rs implements (`op=nl.exp`).
pub const ACT_TOKENS: &[&str] = &[
    "exp",
    "log",
    "copy",
    "reciprocal",
    "sqrt",
    "rsqrt",
    "square",
    "abs",
    "negative",
    "tanh",
    "sigmoid",
    "relu",
    "silu",
    "gelu",
    "gelu_apprx_tanh",
    "gelu_apprx_sigmoid",
    "erf",
    "sin",
    "cos",
    "arctan",
    "softplus",
    "mish",
    "sign",
    "ceil",
    "floor",
    "trunc",
    "tan",
    "erf_dx",
    "gelu_dx",
    "gelu_apprx_sigmoid_dx",
    "silu_dx",
    "logical_not",
    "invert",
    "prelu",
];

/// The "Arithmetic Unary" rows of the docs' ALU operator table (`nki-aluop`):
/// activation tokens the ALU instructions that combine data with a scalar
/// operand also take as their op (`tensor_scalar_reduce(op0=nl.abs, operand0=0.0)`);
/// the operand is then ignored and must be `None` or 0.
pub const ALU_UNARY_TOKENS: &[&str] = &["abs", "square", "relu", "rsqrt", "reciprocal"];

/// Tokens the docs define on integers only (`x`, `y`: "a tile or a scalar value
/// of integer type"): the bitwise operators and shifts.
pub const INTEGER_TOKENS: &[&str] = &["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"];

/// Maximum free size of `nisa.bn_stats`'s input (`nl.tile_size.bn_stats_fmax`).
pub const BN_STATS_FMAX: i64 = 512;
/// Elements per partition `nisa.bn_stats` writes: (count, mean, variance*count) of
/// the even elements, then of the odd ones.
pub const BN_STATS_DIM: i64 = 6;
/// Elements per partition `nisa.bn_aggr` writes: mean, variance.
pub const BN_AGGR_DIM: i64 = 2;

/// Most source tensors one `nisa.dma_compute` combines.
pub const DMA_COMPUTE_MAX_SRCS: usize = 16;

/// Values `max8`, `nc_find_index8` and `nc_match_replace8` handle per partition.
pub const TOP8_K: i64 = 8;
/// Fewest and most elements per partition the top-8 instructions search.
pub const TOP8_DATA_RANGE: (i64, i64) = (8, 16_384);

/// Partitions of `nisa.topk`'s snake layout: element e of the snake sits at
/// partition e % 16, column e / 16 of its group of 16 partitions.
pub const TOPK_SNAKE: i64 = 16;
/// Inclusive range of `nisa.topk`'s `n` (the docs: 8 <= n < 65536).
pub const TOPK_N_RANGE: (i64, i64) = (8, 65_535);
/// Inclusive range of `nisa.topk`'s K (the docs: 1 <= K < 32768, and K <= n).
pub const TOPK_K_RANGE: (i64, i64) = (1, 32_767);

/// Partitions of SBUF and PSUM (`nl.tile_size.pmax`).
pub const PMAX: i64 = 128;
/// fp32 elements per PSUM bank per partition (`nl.tile_size.psum_fmax`, also `psum_bank_fmax`).
pub const PSUM_FMAX: i64 = 512;
/// Bytes per PSUM bank per partition (`nl.tile_size.psum_bank_fmax_bytes`).
pub const PSUM_BANK_FMAX_BYTES: i64 = 2048;
/// Largest free size of a matmul's stationary operand (`nl.tile_size.gemm_stationary_fmax`).
pub const GEMM_STATIONARY_FMAX: i64 = 128;
/// Largest free size of a matmul's moving operand (`nl.tile_size.gemm_moving_fmax`).
pub const GEMM_MOVING_FMAX: i64 = 512;

/// `nl.tile_size` members.
pub const TILE_SIZE: &[(&str, i64)] = &[
    ("pmax", PMAX),
    ("psum_fmax", PSUM_FMAX),
    ("psum_bank_fmax", PSUM_FMAX),
    ("psum_bank_fmax_bytes", PSUM_BANK_FMAX_BYTES),
    ("gemm_stationary_fmax", GEMM_STATIONARY_FMAX),
    ("gemm_moving_fmax", GEMM_MOVING_FMAX),
    ("bn_stats_fmax", BN_STATS_FMAX),
];

/// An `nisa` enum.
#[derive(Clone, Copy, Debug)]
pub struct EnumSpec {
    /// Its name (`reduce_cmd`).
    pub name: &'static str,
    /// Its members with their documented values (a string value is listed as `None`).
    pub members: &'static [(&'static str, Option<i64>)],
    /// Whether kernels may pass it (the emulator has a matching Rust enum).
    pub implemented: bool,
}

/// The `nisa` enums kernels pass as arguments.
pub const ENUMS: &[EnumSpec] = &[
    EnumSpec {
        name: "engine",
        implemented: true,
        members: &[
            ("tensor", Some(1)),
            ("vector", Some(5)),
            ("scalar", Some(2)),
            ("gpsimd", Some(3)),
            ("dma", Some(4)),
            ("sync", Some(6)),
            ("unknown", Some(0)),
        ],
    },
    EnumSpec {
        name: "reduce_cmd",
        implemented: true,
        members: &[("idle", Some(0)), ("reset", Some(1)), ("reduce", Some(2)), ("reset_reduce", Some(3)), ("load_reduce", Some(4))],
    },
    EnumSpec {
        name: "dge_mode",
        implemented: true,
        members: &[("unknown", Some(0)), ("swdge", Some(1)), ("hwdge", Some(2)), ("none", Some(3))],
    },
    EnumSpec { name: "oob_mode", implemented: true, members: &[("error", Some(0)), ("skip", Some(1))] },
    EnumSpec { name: "matmul_perf_mode", implemented: true, members: &[("none", None), ("double_row", None)] },
    EnumSpec { name: "dma_engine", implemented: true, members: &[("dma", Some(1)), ("gpsimd_dma", Some(2))] },
];

/// `nisa.nc_version` members: NeuronCore versions, comparable as integers.
pub const NC_VERSIONS: &[(&str, i64)] = &[("gen2", 2), ("gen3", 3), ("gen4", 4)];

/// The members of the `nisa` enum `name`.
pub fn enum_members(name: &str) -> Option<&'static [(&'static str, Option<i64>)]> {
    ENUMS.iter().find(|e| e.name == name).map(|e| e.members)
}
