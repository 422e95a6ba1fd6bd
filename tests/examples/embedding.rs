//! The embedding example (`dma_copy` from `table.ap(.., vector_offset = ids)`)
//! against a float64 row lookup, and its emitted kernel under the NumPy executor.

use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, ErrorKind, Launch, Precision};
use nki_examples::embedding::embedding;

/// `out[t] = table[ids[t]]`, row by row.
fn reference(table: &[f64], d: usize, ids: &[i64]) -> Vec<f64> {
    ids.iter().flat_map(|&i| table[i as usize * d..(i as usize + 1) * d].to_vec()).collect()
}

/// Token ids in `0..v`, repeats included, in a scrambled order.
fn ids(t: usize, v: usize, seed: u64) -> Vec<i64> {
    uniform(t, seed, 0.0, 1.0).iter().map(|u| ((u * v as f64) as i64).min(v as i64 - 1)).collect()
}

fn id_tensor(ids: &[i64]) -> nki::Tensor {
    nki::Tensor::from_i64(&[ids.len(), 1], ids, Dtype::I32).unwrap()
}

#[test]
fn gathers_the_rows_of_float64_lookups_in_both_precisions() {
    let (v, d, t) = (1000, 96, 384);
    let x = uniform(v * d, 71, -2.0, 2.0);
    let ids = ids(t, v, 72);
    for (dtype, launch) in [(Dtype::F32, Launch::new().precision(Precision::Fp32)), (Dtype::Bf16, Launch::new())] {
        let table = as_dtype(&x, dtype);
        let out = embedding::Call::new(&tensor(&[v, d], &table, dtype), &id_tensor(&ids)).launch(&launch).unwrap();
        assert_eq!(out.shape(), &[t, d]);
        // A DMA moves the table's values unchanged: equal to the looked-up rows exactly.
        assert_close(&format!("embedding {dtype}"), &out.to_f32_vec(), &reference(&table, d, &ids), 0.0, 0.0);
    }
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let (v, d, t) = (300, 40, 256);
    let x = uniform(v * d, 73, -1.0, 1.0);
    let ids = ids(t, v, 74);
    let emu =
        embedding::Call::new(&tensor(&[v, d], &x, Dtype::F32), &id_tensor(&ids)).launch(&Launch::new().precision(Precision::Fp32)).unwrap();
    let args = [Arg::Tensor(vec![v, d], x, Dtype::F32), Arg::Tensor(vec![t, 1], ids.iter().map(|&i| i as f64).collect(), Dtype::I32)];
    let emu_vals: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
    assert_close("embedding numpy vs emulator", &run_numpy("embedding", &args, 1, "fp32")[0], &emu_vals, 0.0, 0.0);
}

#[test]
fn an_id_outside_the_table_is_an_error_naming_the_dma() {
    let (v, d) = (50, 8);
    let mut ids = vec![3i64; 128];
    ids[17] = v as i64;
    let e = embedding::Call::new(&tensor(&[v, d], &vec![1.0; v * d], Dtype::F32), &id_tensor(&ids)).launch(&Launch::new()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Bounds, "{e}");
    assert!(
        e.to_string().contains("nisa.dma_copy") && e.to_string().contains("vector_offset 50") && e.to_string().contains("row 17"),
        "{e}"
    );
}
