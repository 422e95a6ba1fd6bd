use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        tile: i64,
        eps: f64,
    }

    #[nki_helper]
    fn h(cfg: Cfg) -> i64 {
        cfg.tiles
    }

    #[nki_kernel]
    fn k() {
        let cfg = Cfg { tile: 128 };
        let t = h(cfg);
    }
}

fn main() {}
