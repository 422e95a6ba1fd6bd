//! `nc_n_gather` against its documented meaning: per partition, the elements
//! of `data`'s flattened free dims at `indices`; `local_gather`: per 16-partition
//! GpSimd core, runs of each partition's own elements at the core's indices.

use crate::common::*;
use nki_core::isa::{self as nisa, LocalGatherOpts, NameOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

#[test]
fn gathers_flattened_free_elements_per_partition() {
    let (p, a, b, n) = (8usize, 4usize, 6usize, 10usize);
    let data = f32_cells(&uniform(p * a * b, 1, -9.0, 9.0));
    let idx: Vec<f64> = uniform(p * n, 2, 0.0, (a * b) as f64).iter().map(|v| v.floor()).collect();
    let got = launch(Precision::Hardware)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, a as i64, b as i64], Dtype::F32, &data)?;
            let i = sbuf_with(ctx, &[p as i64, 2, (n / 2) as i64], Dtype::U32, &idx)?;
            let d = alloc(ctx, &[p as i64, 2, (n / 2) as i64], Dtype::F32, Buffer::Sbuf)?;
            nisa::nc_n_gather(ctx, &d, &x, &i, NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f64> = (0..p * n).map(|k| data[(k / n) * a * b + idx[k] as usize]).collect();
    assert_close(&got, &want, 0.0, 0.0);
}

#[test]
fn refuses_indices_past_the_partition_and_float_indices() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let x = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
        let i = sbuf_with(ctx, &[2, 2], Dtype::U32, &[0.0, 1.0, 3.0, 4.0])?;
        let d = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
        nisa::nc_n_gather(ctx, &d, &x, &i, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["index 4 in partition 1", "4 elements"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let x = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
        nisa::nc_n_gather(ctx, &x, &x, &x, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["uint32"]);
}

/// `local_gather` written from its docstring: core c's indices are its index tile
/// read down the 16 partitions, column by column; partition p of the core takes
/// `per` elements of its own row from each of the first `valid` of them.
fn local_gather_reference(src: &[f64], nf: usize, idx: &[f64], ni: usize, np: usize, per: usize, valid: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for p in 0..np {
        let core = p / 16 * 16;
        for k in 0..valid {
            let o = idx[(core + k % 16) * ni + k / 16] as usize;
            out.extend((0..per).map(|e| src[p * nf + o + e]));
        }
    }
    out
}

#[test]
fn local_gather_copies_runs_at_each_cores_indices() {
    let (np, nf, ni) = (32usize, 40usize, 3usize);
    let src = f32_cells(&uniform(np * nf, 3, -5.0, 5.0));
    for (per, valid) in [(1usize, None), (4, Some(37usize)), (8, Some(5))] {
        let idx: Vec<f64> = uniform(np * ni, 4 + per as u64, 0.0, (nf - per + 1) as f64).iter().map(|v| v.floor()).collect();
        let n = valid.unwrap_or(16 * ni);
        for precision in [Precision::Fp32, Precision::Hardware] {
            let got = launch(precision)
                .run(|ctx| {
                    let s = sbuf_with(ctx, &[np as i64, nf as i64], Dtype::Bf16, &src)?;
                    let i = sbuf_with(ctx, &[np as i64, ni as i64], Dtype::U16, &idx)?;
                    let d = alloc(ctx, &[np as i64, (n * per) as i64], Dtype::Bf16, Buffer::Sbuf)?;
                    let opts =
                        LocalGatherOpts { num_elem_per_idx: Some(per as i64), num_valid_indices: valid.map(|v| v as i64), name: None };
                    nisa::local_gather(ctx, &d, &s, &i, opts)?;
                    Ok((s.to_f32_vec(), d.to_f32_vec()))
                })
                .unwrap();
            // Cells move exactly: dst holds src_buffer's stored values.
            let stored: Vec<f64> = got.0.iter().map(|&v| v as f64).collect();
            assert_close(&got.1, &local_gather_reference(&stored, nf, &idx, ni, np, per, n), 0.0, 0.0);
        }
    }
}

#[test]
fn local_gather_refuses_documented_violations() {
    let run = |np: i64, idx_dtype: Dtype, idx: f64, per: i64, dst_nf: i64| {
        expect_err(launch(Precision::Fp32).run(|ctx| {
            let s = alloc(ctx, &[np, 8], Dtype::F32, Buffer::Sbuf)?;
            let i = sbuf_with(ctx, &[np, 1], idx_dtype, &vec![idx; np as usize])?;
            let d = alloc(ctx, &[np, dst_nf], Dtype::F32, Buffer::Sbuf)?;
            nisa::local_gather(ctx, &d, &s, &i, LocalGatherOpts { num_elem_per_idx: Some(per), ..Default::default() })
        }))
    };
    assert_err(&run(16, Dtype::U32, 0.0, 1, 16), ErrorKind::Dtype, &["index", "uint16"]);
    assert_err(&run(8, Dtype::U16, 0.0, 1, 16), ErrorKind::Shape, &["multiple of 16"]);
    assert_err(&run(16, Dtype::U16, 0.0, 3, 48), ErrorKind::Argument, &["num_elem_per_idx = 3"]);
    assert_err(&run(16, Dtype::U16, 0.0, 2, 16), ErrorKind::Shape, &["16 partitions x 32 elements"]);
    assert_err(&run(16, Dtype::U16, 7.0, 2, 32), ErrorKind::Constraint, &["index 7", "8 elements per partition"]);
}
