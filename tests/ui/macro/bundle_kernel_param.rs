use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        tile: i64,
        w: Tensor,
    }

    #[nki_kernel]
    fn k(cfg: Cfg) {}
}

fn main() {}
