//! Reductions to the largest value: the library's `max` folder.

pub mod cascaded_max;
pub mod cascaded_max_utils;
