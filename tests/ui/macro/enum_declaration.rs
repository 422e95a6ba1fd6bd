use nki::prelude::*;

#[nki_module]
mod k {
    /// Each member needs its Python value written out, as an integer literal.
    #[nki_enum]
    pub enum Act {
        SIGMOID,
        SOFTMAX = 1 + 1,
    }
}

fn main() {}
