//! `nki.language` functions.

use super::{FnSpec, Kind::*, Returns, opt, req};
use crate::check::rules;

pub static FUNCTIONS: &[FnSpec] = &[
    FnSpec {
        path: &["nl", "ndarray"],
        py: "nl.ndarray",
        rt: "nl::ndarray",
        opts: "nl::NdarrayOpts",
        params: &[req("shape", Ints), req("dtype", Dtype), opt("buffer", Buffer), opt("name", Str), opt("address", Pair)],
        returns: Returns::Custom,
        ctx: true,
        fallible: true,
        positional: false,
        check: Some(rules::ndarray),
    },
    FnSpec {
        path: &["nl", "program_id"],
        py: "nl.program_id",
        rt: "nl::program_id",
        opts: "",
        params: &[req("axis", Int)],
        returns: Returns::Int,
        ctx: true,
        fallible: true,
        positional: false,
        check: None,
    },
    FnSpec {
        path: &["nl", "num_programs"],
        py: "nl.num_programs",
        rt: "nl::num_programs",
        opts: "",
        params: &[req("axes", Int)],
        returns: Returns::Int,
        ctx: true,
        fallible: true,
        positional: false,
        check: None,
    },
    FnSpec {
        path: &["nl", "program_ndim"],
        py: "nl.program_ndim",
        rt: "nl::program_ndim",
        opts: "",
        params: &[],
        returns: Returns::Int,
        ctx: true,
        fallible: false,
        positional: false,
        check: None,
    },
];
