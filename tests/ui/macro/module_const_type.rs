use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    const TILE: usize = 128;
    const EPS: f64 = true;

    #[nki_kernel]
    fn k() {}
}

fn main() {}
