use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        tile: i64,
        #[default(1e-6)]
        eps: f64,
    }

    #[nki_object]
    struct Opts {
        #[default(128)]
        tile: i64,
    }

    #[nki_helper]
    fn h(cfg: Cfg, opts: Opts) -> i64 {
        cfg.tile + opts.tile
    }

    #[nki_kernel]
    fn k() {
        let opts = Opts { ..Default::default() };
        let cfg = Cfg { eps: 1e-5, ..Default::default() };
        let wide = Opts { ..opts };
        let t = h(cfg, wide);
    }
}

fn main() {}
