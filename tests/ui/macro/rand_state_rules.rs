use nki::prelude::*;

#[nki_kernel(target = "trn3")]
fn k() {
    let state = nl::ndarray([128, 6], nl::int32);
    nisa::rand_get_state(state, engine = nisa::engine::vector);
    let ps = nl::ndarray([128, 6], nl::uint32, buffer = nl::psum);
    nisa::rand_get_state(ps);
}

fn main() {}
