use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    const N_MIN: i64 = 1;
    const N_POSITIVE: &str = "k: n must be >= 1";

    #[nki_kernel]
    fn k(n: i64) {
        // A module `&str` constant is a message; an integer constant, an
        // unknown name or a constant with arguments is not.
        assert!(n >= 1, N_POSITIVE);
        assert!(n >= N_MIN, N_MIN);
        assert!(n >= 1, MISSING);
        assert!(n >= 1, N_POSITIVE, n);
    }
}

fn main() {}
