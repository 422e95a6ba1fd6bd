use nki::prelude::*;

#[nki_object]
struct Cfg {
    tile: i64,
}

fn main() {}
