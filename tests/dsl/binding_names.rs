//! Run-time messages name a tile by the `let` binding that holds it, whichever
//! call made it: `nl.load`, `nl` arithmetic, a helper; the newest binding of a
//! rebound name, an assignment; in capacity errors too. An explicit `name=` is kept, and a second
//! variable holding a tile another variable holds does not rename it.

use crate::common::tensor;

use nki::ErrorKind;

use nki::prelude::*;

/// Stores `x` loaded whole into `[k, F]` rows: a shape mismatch unless `k` is `x`'s row count.
#[nki_kernel]
pub fn store_loaded(x: Hbm, k: i64) -> Hbm {
    let [_p, f] = x.shape();
    let out = nl::ndarray([k, f], x.dtype(), buffer = nl::shared_hbm);
    let rows = nl::load(x);
    nl::store(out, rows);
    out
}

/// Stores `exp(x)` into `[k, F]` rows.
#[nki_kernel]
pub fn store_exp(x: Hbm, k: i64) -> Hbm {
    let [_p, f] = x.shape();
    let out = nl::ndarray([k, f], x.dtype(), buffer = nl::shared_hbm);
    let e = nl::exp(nl::load(x));
    let e = nl::add(e, 1.0);
    nl::store(out, e);
    out
}

/// `x` doubled in a new SBUF tile.
#[nki_helper]
fn doubled(x: Hbm) -> Sbuf {
    let t = nl::load(x);
    let twice = nl::multiply(t, 2.0);
    twice
}

/// `t` itself.
#[nki_helper]
fn same(t: Sbuf) -> Sbuf {
    t
}

/// Stores a helper's tile into `[k, F]` rows.
#[nki_kernel]
pub fn store_helper(x: Hbm, k: i64) -> Hbm {
    let [_p, f] = x.shape();
    let out = nl::ndarray([k, f], x.dtype(), buffer = nl::shared_hbm);
    let scaled = doubled(x);
    nl::store(out, scaled);
    out
}

/// Stores `exp(x)`, assigned to a variable declared for `x`, and a helper's tile
/// bound with a declared type, into `[k, F]` rows.
#[nki_kernel]
pub fn store_assigned(x: Hbm, k: i64, typed: bool) -> Hbm {
    let [_p, f] = x.shape();
    let out = nl::ndarray([k, f], x.dtype(), buffer = nl::shared_hbm);
    if typed {
        let twice: Sbuf = doubled(x);
        nl::store(out, twice);
    } else {
        let mut acc = nl::load(x);
        acc = nl::exp(acc);
        nl::store(out, acc);
    }
    out
}

/// Two `nl.matmul` PSUM tiles live beside a six-bank accumulator: eight banks,
/// or nine when `extra` keeps one more tile live.
#[nki_kernel]
pub fn matmuls_beside(x: Hbm, extra: bool) -> Hbm {
    let acc = nl::ndarray([128, 3072], nl::float32, buffer = nl::psum);
    nisa::memset(acc, 0.0);
    let t = nl::load(x);
    let first = nl::matmul(t, t, transpose_x = true);
    let second = nl::matmul(t, t, transpose_x = true);
    let sum = nl::ndarray([4, 4], nl::float32);
    nisa::memset(sum, 0.0);
    if extra {
        let third = nl::matmul(t, t, transpose_x = true);
        nisa::tensor_copy(sum, third);
    }
    nisa::tensor_tensor(sum, sum, first, nl::add);
    nisa::tensor_tensor(sum, sum, second, nl::add);
    nisa::tensor_tensor(sum, sum, acc[s![0..4, 0..4]], nl::add);
    let out = nl::ndarray([4, 4], nl::float32, buffer = nl::shared_hbm);
    nl::store(out, sum);
    out
}

/// Stores a zero tile named explicitly, through a second variable holding it,
/// into `[k, F]` rows.
#[nki_kernel]
pub fn store_named(x: Hbm, k: i64) -> Hbm {
    let [p, f] = x.shape();
    let out = nl::ndarray([k, f], x.dtype(), buffer = nl::shared_hbm);
    let z = nl::zeros([p, f], nl::float32, name = "staging");
    let zeros = same(z);
    nl::store(out, zeros);
    out
}

/// Stores a loaded tile through a second variable a helper returns.
#[nki_kernel]
pub fn store_alias(x: Hbm, k: i64) -> Hbm {
    let [_p, f] = x.shape();
    let out = nl::ndarray([k, f], x.dtype(), buffer = nl::shared_hbm);
    let rows = nl::load(x);
    let alias = same(rows);
    nl::store(out, alias);
    out
}

/// The message of storing `[4, 8]` rows of `src` into `[3, 8]` at `line`.
fn mismatch(line: &str, src: &str) -> String {
    let n = include_str!("binding_names.rs").lines().position(|l| l.contains(line)).expect("the line is in this file") + 1;
    format!(
        "nisa.dma_copy (tests/dsl/binding_names.rs:{n}): src '{src}' [4, 8] float32 in SBUF has 32 elements but dst 'out' [3, 8] \
         float32 in shared HBM has 24; they must match"
    )
}

#[test]
fn a_tile_from_nl_load_arithmetic_or_a_helper_is_named_by_its_binding() {
    let x = tensor(&[4, 8], &[0.5; 32], Dtype::F32);
    let ok = |r: nki::Result<Tensor>| r.unwrap().to_f32_vec();
    // Each stores what it should when the shapes agree.
    assert_eq!(ok(store_loaded::Call::new(&x, 4).launch(&Launch::new())), vec![0.5; 32]);
    let e = (0.5f64.exp() + 1.0) as f32;
    for v in ok(store_exp::Call::new(&x, 4).launch(&Launch::new())) {
        assert!((v - e).abs() <= 1e-6 * e, "{v} vs {e}");
    }
    assert_eq!(ok(store_helper::Call::new(&x, 4).launch(&Launch::new())), vec![1.0; 32]);
    assert_eq!(ok(store_named::Call::new(&x, 4).launch(&Launch::new())), vec![0.0; 32]);
    assert_eq!(ok(store_alias::Call::new(&x, 4).launch(&Launch::new())), vec![0.5; 32]);
    for v in ok(store_assigned::Call::new(&x, 4, false).launch(&Launch::new())) {
        assert!((v - 0.5f32.exp()).abs() <= 1e-6, "{v}");
    }
    assert_eq!(ok(store_assigned::Call::new(&x, 4, true).launch(&Launch::new())), vec![1.0; 32]);

    let err = |r: nki::Result<Tensor>| r.unwrap_err().to_string();
    assert_eq!(err(store_loaded::Call::new(&x, 3).launch(&Launch::new())), mismatch("nl::store(out, rows)", "rows"));
    // The newest of two bindings of `e`.
    assert_eq!(err(store_exp::Call::new(&x, 3).launch(&Launch::new())), mismatch("nl::store(out, e)", "e"));
    // The caller's variable, not the helper's.
    assert_eq!(err(store_helper::Call::new(&x, 3).launch(&Launch::new())), mismatch("nl::store(out, scaled)", "scaled"));
    assert_eq!(err(store_named::Call::new(&x, 3).launch(&Launch::new())), mismatch("nl::store(out, zeros)", "staging"));
    // An assignment names the new tile; so does a `let` with a declared type.
    assert_eq!(err(store_assigned::Call::new(&x, 3, false).launch(&Launch::new())), mismatch("nl::store(out, acc)", "acc"));
    assert_eq!(err(store_assigned::Call::new(&x, 3, true).launch(&Launch::new())), mismatch("nl::store(out, twice)", "twice"));
    // `rows` still holds the tile `alias` names: the tile keeps the name `rows`.
    assert_eq!(err(store_alias::Call::new(&x, 3).launch(&Launch::new())), mismatch("nl::store(out, alias)", "rows"));
}

#[test]
fn psum_capacity_errors_name_nl_matmul_tiles_by_their_bindings() {
    let x = tensor(&[128, 4], &[1.0; 512], Dtype::F32);
    // Each product sums 128 ones; the accumulator adds zeros.
    assert_eq!(matmuls_beside::Call::new(&x, false).launch(&Launch::new()).unwrap().to_f32_vec(), vec![256.0; 16]);
    let e = matmuls_beside::Call::new(&x, true).launch(&Launch::new()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Capacity, "{e}");
    let msg = e.to_string();
    for part in ["tensor 'third' needs 1 bank", "8 of the 8 banks are in use: 'acc' (6 banks), 'first' (1 bank), 'second' (1 bank)"] {
        assert!(msg.contains(part), "{part:?} not in {msg}");
    }
}
