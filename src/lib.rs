//! nki facade
