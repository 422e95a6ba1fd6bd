use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        tile: i64,
    }

    #[nki_object]
    struct Eps {
        eps: f64,
    }

    #[nki_kernel]
    fn k(wide: bool) {
        let cfg = if wide { Cfg { tile: 512 } } else { Eps { eps: 1e-6 } };
        let tile = if wide { Cfg { tile: 512 } } else { 128 };
    }
}

fn main() {}
