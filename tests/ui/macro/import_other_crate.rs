use nki::prelude::*;

// A module of another crate that does not export its items: rustc finds no
// macro answering for it, at the import.
#[nki_module]
mod user {
    use nki::prelude::*;
    use nkilib::moe::moe_cte::moe_cte_utils::SkipMode;

    #[nki_kernel]
    fn k(skip: Option<SkipMode>) {}
}

// The export names the module other crates import from.
#[nki_module(export)]
mod exporter {}

// A bundle of another crate's exported module is checked as one of this crate's.
#[nki_module]
mod reader {
    use nki::prelude::*;
    use nkilib::experimental::moe::blockwise_mm_backward::ClampLimits;

    #[nki_kernel]
    fn k2(x: Hbm, limits: ClampLimits) {
        assert!(limits.linear_clamp_upper > 0.0, "k2: the limit must be positive");
    }
}

fn main() {}
