//! The projection after an attention block, `attention @ weight + bias`:
//! the library's `output_projection` folder (decode and context encoding).

pub mod output_projection_cte;
pub mod output_projection_tkg;
pub mod output_projection_utils;
