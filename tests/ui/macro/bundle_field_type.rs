use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    #[nki_object]
    struct Cfg {
        tile: i64,
        dtype: Dtype,
    }

    #[nki_kernel]
    fn k(x: Hbm) {
        let cfg = Cfg { tile: 1.5, dtype: x.dtype() };
        let t = x.shape().len;
    }
}

fn main() {}
