use nki::prelude::*;

#[nki_module]
pub mod a {
    use nki::prelude::*;

    /// Doubles `t`.
    #[nki_helper]
    pub fn double(t: Sbuf) {
        nisa::tensor_scalar(t, t, nl::multiply, 2.0);
    }
}

#[nki_module]
pub mod b {
    use nki::prelude::*;

    /// Calls a helper of another module it did not import: rustc names the
    /// call and the import it needs.
    #[nki_kernel]
    pub fn k(x: Hbm) -> Hbm {
        let t = nl::ndarray([128, 4], nl::float32);
        nisa::dma_copy(t, x);
        double(t);
        let out = nl::ndarray([128, 4], nl::float32, buffer = nl::shared_hbm);
        nisa::dma_copy(out, t);
        out
    }
}

fn main() {}
