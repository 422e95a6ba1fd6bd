use nki::prelude::*;

/// Trace-time integers are i64 in the emulation: folding constants that leave
/// that range is an error at the operation, as is dividing by zero.
#[nki_kernel]
fn k(n: i64) -> i64 {
    let lo = -9223372036854775807 - 1;
    let a = lo / -1;
    let b = lo % -1;
    let c = 9223372036854775807 + 1;
    let d = 4611686018427387904 * 2;
    let e = -lo;
    let f = lo.abs();
    let g = lo.div_ceil(2);
    let h = n / 0;
    // Unknown values are left to the emulation, which checks them at run time.
    let fine = n * 9223372036854775807 + 1;
    a + b + c + d + e + f + g + h + fine
}

fn main() {}
