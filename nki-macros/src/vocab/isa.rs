//! `nki.isa` functions.

use super::{FnSpec, Kind::*, OpClass, Param, Returns, Spaces, opt, req, spec};
use crate::check::rules;

const NAME: Param = opt("name", Str);

/// An `nisa` instruction with an options struct and an optional static rule.
macro_rules! isa {
    ($name:literal, $opts:literal, [$($p:expr),* $(,)?], $check:expr) => {
        spec!("nisa"::$name($($p),*), opts: $opts, check: $check)
    };
}

pub static FUNCTIONS: &[FnSpec] = &[
    isa!(
        "dma_copy",
        "nisa::DmaCopyOpts",
        [
            req("dst", Tensor(Spaces::Dma)),
            req("src", Tensor(Spaces::Dma)),
            opt("priority", Int),
            opt("oob_mode", Enum("oob_mode")),
            opt("dge_mode", Enum("dge_mode")),
            opt("engine", Enum("engine")),
            NAME,
        ],
        Some(rules::dma_copy)
    ),
    isa!(
        "dma_transpose",
        "nisa::DmaTransposeOpts",
        [
            req("dst", Tensor(Spaces::Sbuf)),
            req("src", Tensor(Spaces::Dma)),
            opt("axes", Ints),
            opt("priority", Int),
            opt("dge_mode", Enum("dge_mode")),
            opt("oob_mode", Enum("oob_mode")),
            NAME,
        ],
        Some(crate::check::dma_transpose::check)
    ),
    isa!(
        "tensor_copy",
        "nisa::EngineOpts",
        [req("dst", Tensor(Spaces::OnChip)), req("src", Tensor(Spaces::OnChip)), opt("engine", Enum("engine")), NAME],
        Some(rules::same_tile_dst_src)
    ),
    isa!(
        "memset",
        "nisa::EngineOpts",
        [req("dst", Tensor(Spaces::OnChip)), req("value", Float), opt("engine", Enum("engine")), NAME],
        None
    ),
    isa!(
        "nc_matmul",
        "nisa::NcMatmulOpts",
        [
            req("dst", Tensor(Spaces::Psum)),
            req("stationary", Tensor(Spaces::Sbuf)),
            req("moving", Tensor(Spaces::Sbuf)),
            opt("is_stationary_onezero", Bool),
            opt("is_moving_onezero", Bool),
            opt("is_transpose", Bool),
            opt("accumulate", OptBool),
            opt("tile_position", Pair),
            opt("tile_size", Pair),
            opt("perf_mode", Enum("matmul_perf_mode")),
            NAME,
        ],
        Some(rules::nc_matmul)
    ),
    isa!(
        "nc_transpose",
        "nisa::NcTransposeOpts",
        [req("dst", Tensor(Spaces::OnChip)), req("data", Tensor(Spaces::OnChip)), opt("engine", Enum("engine")), NAME],
        Some(rules::nc_transpose)
    ),
    isa!(
        "tensor_tensor",
        "nisa::EngineOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("data1", Tensor(Spaces::OnChip)),
            req("data2", Tensor(Spaces::OnChip)),
            req("op", Op(OpClass::Alu)),
            opt("engine", Enum("engine")),
            NAME,
        ],
        Some(rules::tensor_tensor)
    ),
    isa!(
        "tensor_scalar",
        "nisa::TensorScalarOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("data", Tensor(Spaces::OnChip)),
            req("op0", Op(OpClass::Any)),
            req("operand0", Operand),
            opt("reverse0", Bool),
            opt("op1", Op(OpClass::Any)),
            opt("operand1", Operand),
            opt("reverse1", Bool),
            opt("engine", Enum("engine")),
            NAME,
        ],
        Some(rules::same_tile_dst_data)
    ),
    isa!(
        "scalar_tensor_tensor",
        "nisa::ScalarTensorTensorOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("data", Tensor(Spaces::OnChip)),
            req("op0", Op(OpClass::Alu)),
            req("operand0", Operand),
            req("op1", Op(OpClass::Alu)),
            req("operand1", Tensor(Spaces::OnChip)),
            opt("reverse0", Bool),
            opt("reverse1", Bool),
            NAME,
        ],
        Some(rules::same_tile_dst_data)
    ),
    isa!(
        "tensor_reduce",
        "nisa::TensorReduceOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("op", Op(OpClass::Alu)),
            req("data", Tensor(Spaces::OnChip)),
            req("axis", Axis),
            opt("negate", Bool),
            opt("keepdims", Bool),
            NAME,
        ],
        Some(rules::tensor_reduce)
    ),
    isa!(
        "tensor_scalar_reduce",
        "nisa::TensorScalarReduceOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("data", Tensor(Spaces::OnChip)),
            req("op0", Op(OpClass::Alu)),
            req("operand0", Operand),
            req("reduce_op", Op(OpClass::Alu)),
            opt("reduce_res", Tensor(Spaces::OnChip)),
            opt("reverse0", Bool),
            opt("reduce_cmd", Enum("reduce_cmd")),
            opt("reduce_init", Operand),
            opt("reduce_res_negate", Bool),
            NAME,
        ],
        Some(rules::same_tile_dst_data)
    ),
    isa!(
        "activation",
        "nisa::ActivationOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("op", Op(OpClass::Act)),
            req("data", Tensor(Spaces::OnChip)),
            opt("bias", Operand),
            opt("scale", Operand),
            opt("reduce_op", Op(OpClass::Alu)),
            opt("reduce_res", Tensor(Spaces::OnChip)),
            opt("reduce_cmd", Enum("reduce_cmd")),
            NAME,
        ],
        Some(rules::same_tile_dst_data)
    ),
    isa!(
        "activation_reduce",
        "nisa::ActivationReduceOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("op", Op(OpClass::Act)),
            req("data", Tensor(Spaces::OnChip)),
            req("reduce_op", Op(OpClass::Alu)),
            req("reduce_res", Tensor(Spaces::OnChip)),
            opt("bias", Operand),
            opt("scale", Operand),
            NAME,
        ],
        Some(rules::same_tile_dst_data)
    ),
    isa!(
        "reciprocal",
        "nisa::NameOpts",
        [req("dst", Tensor(Spaces::OnChip)), req("data", Tensor(Spaces::OnChip)), NAME],
        Some(rules::same_tile_dst_data)
    ),
    isa!(
        "iota",
        "nisa::IotaOpts",
        [req("dst", Tensor(Spaces::Sbuf)), req("pattern", Pattern), opt("offset", Int), opt("channel_multiplier", Int), NAME],
        None
    ),
    isa!(
        "affine_select",
        "nisa::AffineSelectOpts",
        [
            req("dst", Tensor(Spaces::Sbuf)),
            req("pattern", Pattern),
            req("channel_multiplier", Int),
            req("on_true_tile", Tensor(Spaces::Sbuf)),
            req("on_false_value", Float),
            opt("cmp_op", Op(OpClass::Alu)),
            opt("offset", Int),
            NAME,
        ],
        Some(rules::affine_select)
    ),
    isa!(
        "range_select",
        "nisa::RangeSelectOpts",
        [
            req("dst", Tensor(Spaces::OnChip)),
            req("on_true_tile", Tensor(Spaces::OnChip)),
            req("comp_op0", Op(OpClass::Alu)),
            req("comp_op1", Op(OpClass::Alu)),
            req("bound0", Tensor(Spaces::OnChip)),
            req("bound1", Tensor(Spaces::OnChip)),
            opt("reduce_cmd", Enum("reduce_cmd")),
            opt("reduce_res", Tensor(Spaces::OnChip)),
            opt("reduce_op", Op(OpClass::Alu)),
            opt("range_start", Int),
            opt("on_false_value", Float),
            NAME,
        ],
        Some(rules::range_select)
    ),
    isa!(
        "nc_stream_shuffle",
        "nisa::ShuffleOpts",
        [req("dst", Tensor(Spaces::OnChip)), req("src", Tensor(Spaces::OnChip)), req("shuffle_mask", Ints), NAME],
        None
    ),
    isa!(
        "core_barrier",
        "nisa::CoreBarrierOpts",
        [req("data", Tensor(Spaces::SharedHbm)), req("cores", Ints), opt("engine", Enum("engine")), NAME],
        None
    ),
    spec!("nisa"::"register_alloc"(opt("x", Int)), returns: Returns::Register),
    isa!("register_move", "", [req("dst", Register), req("src", RegisterSource)], None),
    isa!("register_load", "", [req("dst", Register), req("src", Tensor(Spaces::Any))], None),
    isa!("register_store", "", [req("dst", Tensor(Spaces::Any)), req("src", Register)], None),
    spec!("nisa"::"get_nc_version"(), returns: Returns::Int, fallible: false),
];
