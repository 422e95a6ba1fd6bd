use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        #[default(true)]
        tile: i64,
        #[default(0.5)]
        scale: f64,
        rows: i64,
        #[default(x)]
        cols: i64,
        #[range(>= 0)]
        on: i64,
    }

    #[nki_kernel]
    fn k(cfg: Cfg) {
        assert!(cfg.tile > 0, "tile must be positive, got {}", cfg.tile);
    }
}

fn main() {}
