use nki::prelude::*;

/// Every method's arguments are checked against its table entry.
#[nki_kernel]
fn k(x: f64, n: i64, o: Option<i64>) -> f64 {
    let a = x.powf();
    let b = n.min();
    let c = x.sqrt(2.0);
    let d = n.pow(2, 3);
    let e = o.unwrap_or();
    let f = x.powi(2.5);
    let g = Some(n).unwrap_or(0);
    let h = n.floor();
    a + b as f64 + c + d as f64 + e as f64 + f + g as f64 + h
}

fn main() {}
