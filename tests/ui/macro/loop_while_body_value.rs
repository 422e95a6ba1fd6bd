use nki::prelude::*;

#[nki_kernel]
fn k() {
    let reg = nisa::register_alloc(1);
    nl::while_loop(reg, |r| {
        nisa::register_move(r, 0);
        1
    });
}

fn main() {}
