//! `sequence_bounds` against the docs' worked example and a reference written
//! from its docstring; `get_nc_version` / `get_nc_sub_version` per generation.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, NameOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Launch, Precision};

/// Start (first position) and end (one past the last) of each element's run of
/// equal ids; padding (id 0) gets `n` and `-1`.
fn bounds(ids: &[f64]) -> Vec<f64> {
    let n = ids.len();
    let run = |i: usize| {
        let (mut s, mut e) = (i, i + 1);
        while s > 0 && ids[s - 1] == ids[i] {
            s -= 1;
        }
        while e < n && ids[e] == ids[i] {
            e += 1;
        }
        (s as f64, e as f64)
    };
    let (starts, ends): (Vec<f64>, Vec<f64>) = (0..n).map(|i| if ids[i] == 0.0 { (n as f64, -1.0) } else { run(i) }).unzip();
    [starts, ends].concat()
}

fn run_bounds(ids: &[f64], dtype: Dtype) -> Vec<f32> {
    let n = ids.len() as i64;
    launch(Precision::Hardware)
        .run(|ctx| {
            let s = sbuf_with(ctx, &[1, n], dtype, ids)?;
            let d = alloc(ctx, &[1, 2, n], dtype, Buffer::Sbuf)?;
            nisa::sequence_bounds(ctx, &d, &s, NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap()
}

#[test]
fn sequence_bounds_reproduces_the_documented_example() {
    let ids = [0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.0, 3.0, 3.0];
    let want = [9.0, 1.0, 1.0, 3.0, 3.0, 3.0, 9.0, 7.0, 7.0, -1.0, 3.0, 3.0, 6.0, 6.0, 6.0, -1.0, 9.0, 9.0];
    for dtype in [Dtype::I32, Dtype::F32] {
        assert_close(&run_bounds(&ids, dtype), &want, 0.0, 0.0);
    }
}

#[test]
fn sequence_bounds_of_sorted_random_ids() {
    let ids: Vec<f64> = {
        let mut v: Vec<f64> = uniform(512, 5, 0.0, 40.0).iter().map(|x| x.floor()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    assert_close(&run_bounds(&ids, Dtype::F32), &bounds(&ids), 0.0, 0.0);
    // Unsorted ids: runs are consecutive equal ids.
    let ids: Vec<f64> = uniform(100, 6, 0.0, 3.0).iter().map(|x| x.floor()).collect();
    assert_close(&run_bounds(&ids, Dtype::I32), &bounds(&ids), 0.0, 0.0);
}

#[test]
fn sequence_bounds_refuses_documented_violations() {
    let run = |p: i64, n: i64, dst: [i64; 3], dtype: Dtype, buffer: Buffer| {
        expect_err(launch(Precision::Fp32).run(|ctx| {
            let s = alloc(ctx, &[p, n], dtype, Buffer::Sbuf)?;
            let d = alloc(ctx, &dst, dtype, buffer)?;
            nisa::sequence_bounds(ctx, &d, &s, NameOpts::default())
        }))
    };
    assert_err(&run(1, 8, [1, 2, 8], Dtype::Bf16, Buffer::Sbuf), ErrorKind::Dtype, &["float32 or int32"]);
    assert_err(&run(2, 8, [1, 2, 8], Dtype::F32, Buffer::Sbuf), ErrorKind::Shape, &["one partition"]);
    assert_err(&run(1, 8, [1, 2, 4], Dtype::F32, Buffer::Sbuf), ErrorKind::Shape, &["[1, 2, 8]"]);
    assert_err(&run(1, 8, [1, 2, 8], Dtype::F32, Buffer::Psum), ErrorKind::Constraint, &["SBUF"]);
}

#[test]
fn nc_versions_per_generation() {
    for (generation, version) in [(Generation::Trn1, 2), (Generation::Trn2, 3), (Generation::Trn3, 4)] {
        let got = Launch::new().generation(generation).run(|ctx| Ok((nisa::get_nc_version(ctx), nisa::get_nc_sub_version()))).unwrap();
        assert_eq!(got, (version, 0), "{generation}");
    }
    assert_eq!((nisa::nc_version::gen2, nisa::nc_version::gen3, nisa::nc_version::gen4), (2, 3, 4));
}
