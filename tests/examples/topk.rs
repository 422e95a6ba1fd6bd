//! The top-k example (`max8`, `nc_find_index8`, `nc_match_replace8`) against a
//! float64 sort of each row, in both precision modes.

use crate::common::{tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nki_examples::topk::topk;

/// Per row, the `k` largest values and their columns (ties: the lower column first).
fn reference(x: &[f64], d: usize, k: usize) -> (Vec<f64>, Vec<i64>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for row in x.chunks(d) {
        let mut order: Vec<usize> = (0..d).collect();
        order.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).expect("no NaN").then(a.cmp(&b)));
        for &j in &order[..k] {
            vals.push(row[j]);
            idx.push(j as i64);
        }
    }
    (vals, idx)
}

/// Rows that are shuffled integers (exact in bf16), some repeated so rows hold ties.
fn rows(n: usize, d: usize, seed: u64) -> Vec<f64> {
    uniform(n * d, seed, 0.0, 1.0).iter().map(|u| (u * 120.0).floor() - 60.0).collect()
}

fn run(x: &[f64], n: usize, d: usize, k: i64, dtype: Dtype, launch: &Launch) -> (Vec<f32>, Vec<i64>) {
    let (v, i) = topk::Call::new(&tensor(&[n, d], x, dtype), k).launch(launch).unwrap();
    (v.to_f32_vec(), i.to_i64_vec())
}

#[test]
fn matches_a_float64_sort_with_ties_in_both_precisions() {
    let (n, d, k) = (256, 200, 24);
    let x = rows(n, d, 51);
    let (want_v, want_i) = reference(&x, d, k);
    for (dtype, launch) in [(Dtype::F32, Launch::new().precision(Precision::Fp32)), (Dtype::Bf16, Launch::new())] {
        let (v, i) = run(&x, n, d, k as i64, dtype, &launch);
        let v: Vec<f64> = v.into_iter().map(f64::from).collect();
        assert_eq!(v, want_v, "{dtype}: values");
        assert_eq!(i, want_i, "{dtype}: indices");
    }
}

#[test]
fn rejects_k_not_a_multiple_of_8() {
    let t = tensor(&[128, 64], &vec![0.0; 128 * 64], Dtype::F32);
    let e = topk::Call::new(&t, 12).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("multiple of 8"), "{e}");
}
