//! The context-encoding output projection: the library's
//! `output_projection_cte` folder.

pub mod output_projection_cte;
pub mod output_projection_cte_mx;
pub mod output_projection_cte_parameters;
