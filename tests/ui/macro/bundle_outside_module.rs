use nki::prelude::*;

#[nki_object]
struct Cfg {
    tile: i64,
}

#[nki_params]
struct Window {
    lo: f64,
}

fn main() {}
