//! `nki.language` functions.

use super::{FnSpec, Kind::*, Returns, opt, req, spec};
use crate::check::rules;

pub static FUNCTIONS: &[FnSpec] = &[
    spec!(
        "nl"::"ndarray"(req("shape", Ints), req("dtype", Dtype), opt("buffer", Buffer), opt("name", Str), opt("address", Pair)),
        opts: "nl::NdarrayOpts",
        returns: Returns::Custom,
        check: Some(rules::ndarray),
    ),
    spec!("nl"::"program_id"(req("axis", Int)), returns: Returns::Int),
    spec!("nl"::"num_programs"(req("axes", Int)), returns: Returns::Int),
    spec!("nl"::"program_ndim"(), returns: Returns::Int, fallible: false),
];
