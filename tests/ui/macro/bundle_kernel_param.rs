use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    // An on-chip tensor: the caller gives HBM tensors only.
    #[nki_object]
    struct Cfg {
        tile: i64,
        w: Sbuf,
    }

    #[nki_kernel]
    fn k(cfg: Cfg) {}

    // A nested bundle's field is named by its path.
    #[nki_object]
    struct Inner {
        #[default(None)]
        scale: Option<Hbm>,
        #[default(nl::float32)]
        dtype: Dtype,
    }

    #[nki_object]
    struct Outer {
        #[default(None)]
        inner: Option<Inner>,
    }

    #[nki_kernel]
    fn nested(cfg: Outer) {}

    // Bundles nested past the bound.
    #[nki_object]
    struct L5 {
        x: i64,
    }

    #[nki_object]
    struct L4 {
        n: L5,
    }

    #[nki_object]
    struct L3 {
        n: L4,
    }

    #[nki_object]
    struct L2 {
        n: L3,
    }

    #[nki_object]
    struct L1 {
        #[default(None)]
        n: Option<L2>,
    }

    #[nki_kernel]
    fn deep(cfg: L1) {}

    // A dtype contract on a field that holds no tensor.
    #[nki_object]
    struct Typed {
        #[dtypes(float32)]
        n: i64,
    }
}

fn main() {}
