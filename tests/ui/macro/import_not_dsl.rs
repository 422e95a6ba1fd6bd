use nki::prelude::*;

#[nki_module]
mod shared {
    /// A constant of a type kernels do not have.
    pub const ROWS: usize = 4;
    /// A constant kernels can use.
    pub const COLS: i64 = 8;
    /// A struct that is not an #[nki_object].
    pub struct Plain {
        pub n: i64,
    }
}

mod not_a_module {
    pub const TILE: i64 = 128;
}

#[nki_module]
mod user {
    // A constant of a type kernels lack, a struct that is no bundle, and a
    // renamed import are refused, each naming the item.
    use crate::shared::{COLS as WIDTH, Plain, ROWS};
    use nki::prelude::*;

    #[nki_kernel]
    fn k(n: i64) {
        assert!(n >= 1, "k: n must be >= 1");
    }
}

#[nki_module]
mod user_of_plain_module {
    // A module that is not an #[nki_module] has no items to give.
    use crate::not_a_module::TILE;
    use nki::prelude::*;

    #[nki_kernel]
    fn k2(n: i64) {
        assert!(n >= 1, "k2: n must be >= 1");
    }
}

fn main() {}
