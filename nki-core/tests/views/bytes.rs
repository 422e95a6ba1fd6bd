//! `NkiTensor.view(dtype)`: the same little-endian bytes as another dtype, in
//! HBM and SBUF, read and written through the view, against byte arithmetic on
//! the source values; the documented constraints as errors.

use crate::common::{alloc, hbm, launch};
use nki_core::isa::{self as nisa, EngineOpts};
use nki_core::{Buffer, Dtype, Precision, Tensor, s};

#[test]
fn a_view_reads_the_bytes_and_scales_the_last_dim() {
    let vals = [1.5f32, -2.0, 3.25e-3, 65504.0, -0.0, 7.0];
    let t = hbm(&[3, 2], &vals.map(f64::from), Dtype::F32);
    // Narrower: the last dim grows by the size ratio, every row's bytes in order.
    let u8s = t.view(Dtype::U8).unwrap();
    assert_eq!(u8s.shape(), &[3, 8]);
    let want: Vec<f32> = vals.iter().flat_map(|v| v.to_le_bytes()).map(f32::from).collect();
    assert_eq!(u8s.to_f32_vec(), want);
    let halves = t.view(Dtype::I16).unwrap();
    let want: Vec<i64> = vals.iter().flat_map(|v| [v.to_bits() as u16 as i16, (v.to_bits() >> 16) as u16 as i16]).map(i64::from).collect();
    assert_eq!(halves.to_i64_vec(), want);
    // Wider: a column slice of even width and offset as float32 again.
    let back = u8s.index(&s![.., 4..8]).unwrap().view(Dtype::F32);
    assert!(back.is_err(), "a view of a reinterpreted view is refused");
    let words = Tensor::from_i64(&[2, 8], &(0..16).map(|k| k * 17 % 256).collect::<Vec<_>>(), Dtype::U8).unwrap();
    let w = words.index(&s![.., 4..8]).unwrap().view(Dtype::U32).unwrap();
    assert_eq!(w.shape(), &[2, 1]);
    let word = |r: i64| (0..4).map(|b| ((r * 8 + 4 + b) * 17 % 256) << (8 * b)).sum::<i64>();
    assert_eq!(w.to_i64_vec(), vec![word(0), word(1)]);
    // Same dtype: the view itself.
    assert_eq!(t.view(Dtype::F32).unwrap().to_f32_vec(), vals.to_vec());
}

#[test]
fn writes_through_a_view_change_only_the_touched_cells() {
    for precision in [Precision::Hardware, Precision::Fp32] {
        let out = launch(precision)
            .run(|ctx| {
                // SBUF int32 [P, 2]; its int16 view [P, 4]. Copying halves 0..2 of the
                // view onto the int32 tile reads all sources before writing.
                let p = 4usize;
                let words: Vec<i64> = (0..2 * p as i64).map(|k| (k + 1) * 0x0001_0003 - 7 * (k % 3) * 0x10000).collect();
                let t = alloc(ctx, &[p as i64, 2], Dtype::I32, Buffer::Sbuf)?;
                let src = Tensor::from_i64(&[p, 2], &words, Dtype::I32)?;
                nisa::dma_copy(ctx, &t, &src, Default::default())?;
                let halves = t.view(Dtype::I16)?;
                nisa::tensor_copy(ctx, &t, &halves.index(&s![.., 0..2])?, EngineOpts::default())?;
                Ok((words, t.to_i64_vec()))
            })
            .unwrap();
        let (words, got) = out;
        let want: Vec<i64> =
            words.chunks(2).flat_map(|w| [i64::from(w[0] as u32 as u16 as i16), i64::from((w[0] as u32 >> 16) as u16 as i16)]).collect();
        assert_eq!(got, want, "{precision:?}");
    }
    // A bfloat16 view of float32 cells: writing the high half of cell 0 keeps cell 1.
    let t = hbm(&[1, 2], &[1.0, 3.0], Dtype::F32);
    let v = t.view(Dtype::Bf16).unwrap();
    v.index(&s![.., 1..2]).unwrap().fill_from_f32(&[-2.0]).unwrap();
    assert_eq!(t.to_f32_vec(), vec![-2.0, 3.0]);
}

#[test]
fn the_documented_constraints_are_errors() {
    let t = hbm(&[2, 6], &[0.0; 12], Dtype::Bf16);
    let strided = t.index(&s![.., 0..6;2]).unwrap().view(Dtype::U8).unwrap_err().to_string();
    assert!(strided.contains("must be contiguous"), "{strided}");
    let split = t.index(&s![.., 0..3]).unwrap().view(Dtype::F32).unwrap_err().to_string();
    assert!(split.contains("whole float32 elements"), "{split}");
    let offset = t.index(&s![.., 1..5]).unwrap().view(Dtype::F32).unwrap_err().to_string();
    assert!(offset.contains("multiples of 2"), "{offset}");
    let e = launch(Precision::Hardware)
        .run(|ctx| {
            let ps = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Psum)?;
            Ok(ps.view(Dtype::I32).unwrap_err().to_string())
        })
        .unwrap();
    assert!(e.contains("PSUM"), "{e}");
    let odd = hbm(&[3], &[0.0; 3], Dtype::Bf16).view(Dtype::F32).unwrap_err().to_string();
    assert!(odd.contains("6 bytes per partition"), "{odd}");
}

#[test]
fn in_fp32_precision_a_write_through_a_view_rounds_the_base_cells_to_their_dtype() {
    // bfloat16 cells hold unrounded float32 values in fp32 precision; the view's
    // write stores bytes, so the untouched cell reads back as its bfloat16 rounding.
    let v = 1.0 + 2f64.powi(-10);
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let t = alloc(ctx, &[2, 2], Dtype::Bf16, Buffer::Sbuf)?;
            nisa::memset(ctx, &t, v, EngineOpts::default())?;
            let before = t.to_f32_vec();
            nisa::memset(ctx, &t.view(Dtype::I16)?.index(&s![.., 0..1])?, 0.0, EngineOpts::default())?;
            Ok((before, t.to_f32_vec()))
        })
        .unwrap();
    assert_eq!(got.0, vec![v as f32; 4], "fp32 precision keeps the unrounded value");
    assert_eq!(got.1, vec![0.0, 1.0, 0.0, 1.0]);
}
