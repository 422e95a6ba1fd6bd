use nki::prelude::*;

#[nki_module]
mod k {
    use nki::prelude::*;

    // `None` is the default of an `Option` field only, and an `Option`
    // field's other defaults are of its item type.
    #[nki_object]
    struct Limits {
        #[default(None)]
        upper: Option<f64>,
        #[default(None)]
        tile: i64,
        #[default(true)]
        lower: Option<f64>,
    }

    // A bundle a kernel takes as an `Option` holds what its caller can give.
    #[nki_object]
    struct Held {
        w: Option<Psum>,
        #[default(None)]
        scale: Option<f64>,
    }

    #[nki_kernel]
    fn k(lim: Option<Limits>, held: Option<Held>) {}
}

fn main() {}
