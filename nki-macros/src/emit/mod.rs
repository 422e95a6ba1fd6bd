//! Emit: the two artifacts of one kernel, from the checked tree.

pub mod python;
pub mod rust;
