//! `my-kernels`: a crate's own kernels with the whole `nki` command line —
//! `cargo run --release -- list`, `run`, `profile`, `emit` and `ops` over the
//! kernels below (and the `nki` crate's attention kernels).

mod activations;

nki::main!();
