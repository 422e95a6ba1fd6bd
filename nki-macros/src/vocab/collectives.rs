//! `nki.collectives` functions.

use super::{FnSpec, Kind::*, OpClass, Returns, opt, req, spec};

pub static FUNCTIONS: &[FnSpec] = &[
    spec!(
        "ncc"::"ReplicaGroup"(req("groups", Groups)),
        returns: Returns::ReplicaGroup,
        ctx: false,
        fallible: false,
        positional: true,
    ),
    spec!(
        "ncc"::"collective_permute_implicit"(
            req("srcs_by_channel", TensorLists),
            req("dsts_by_channel", TensorLists),
            req("replica_group", ReplicaGroup),
            opt("channel_ids", Ints),
            opt("priority", Int),
            opt("name", Str),
        ),
        opts: "ncc::PermuteOpts",
    ),
    spec!(
        "ncc"::"collective_permute_implicit_reduce"(
            req("srcs0_by_channel", TensorLists),
            req("srcs1_by_channel", TensorLists),
            req("dsts_by_channel", TensorLists),
            req("replica_group", ReplicaGroup),
            req("op", Op(OpClass::Alu)),
            opt("channel_ids", Ints),
            opt("priority", Int),
            opt("name", Str),
        ),
        opts: "ncc::PermuteOpts",
    ),
    spec!(
        "ncc"::"collective_permute_implicit_current_processing_rank_id"(
            req("iteration_id", Int),
            req("replica_group", ReplicaGroup),
            opt("channel_id", Int),
            opt("name", Str),
        ),
        opts: "ncc::RankIdOpts",
        returns: Returns::Register,
    ),
];
