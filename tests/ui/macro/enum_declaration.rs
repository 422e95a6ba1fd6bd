use nki::prelude::*;

#[nki_module]
mod k {
    /// A member's Python value is an integer literal, or counted on from
    /// the member before as Rust counts (SIGMOID is 0).
    #[nki_enum]
    pub enum Act {
        SIGMOID,
        SOFTMAX = 1 + 1,
    }

    /// Counting on past the largest i64 is refused by name.
    #[nki_enum]
    pub enum Wide {
        LAST = 9223372036854775807,
        PAST,
    }
}

fn main() {}
