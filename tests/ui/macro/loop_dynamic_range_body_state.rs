use nki::prelude::*;

// The body of nl::dynamic_range is traced once and run by the device: it cannot
// change trace-time state.
#[nki_kernel]
fn k() -> i64 {
    let mut turns = 0;
    for _ in nl::dynamic_range(4) {
        turns += 1;
        for j in 0..2 {
            turns = j;
        }
        return turns;
    }
    turns
}

fn main() {}
