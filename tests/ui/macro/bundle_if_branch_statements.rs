use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        tile: i64,
    }

    #[nki_helper]
    fn h(cfg: Cfg) -> i64 {
        cfg.tile
    }

    #[nki_kernel]
    fn k(wide: bool) {
        let cfg = if wide {
            let tile = 512;
            Cfg { tile }
        } else {
            Cfg { tile: 128 }
        };
        let t = h(cfg);
    }
}

fn main() {}
