//! Byte views in a kernel: `.view(dtype)` and `.ap(.., dtype=)` read and write
//! the same little-endian bytes as another dtype, in HBM and SBUF, through the
//! DMA engines and a compute engine, in the emulator and under the NumPy
//! executor; the references decode the bytes independently.

use crate::common;

use crate::common::{Arg, as_dtype, assert_close, tensor, uniform};
use nki::prelude::*;

/// `x` `[P, 8]` bfloat16, `y` `[P, 4]` float32:
/// - `bits`: `x`'s bytes as int16 (an HBM view by `.reinterpret_cast`, the
///   alias of `.view`, copied by DMA);
/// - `bytes`: `y` loaded to SBUF, its bytes as uint8 `[P, 16]` (an SBUF view,
///   copied by the Vector engine);
/// - `high`: the upper bfloat16 half of each `y` value, by `.ap(dtype=)` with
///   steps and offset counted in bfloat16 elements;
/// - `pairs`: `x` written into a float32 SBUF tile through its bfloat16 view,
///   so float32 j of a row holds bfloat16s 2j (low half) and 2j + 1.
#[nki_kernel]
pub fn byte_views(x: Hbm, y: Hbm) -> (Hbm, Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let bits = nl::ndarray([p, f], nl::int16, buffer = nl::shared_hbm);
    nisa::dma_copy(bits, x.reinterpret_cast(nl::int16));
    let ys = nl::ndarray([p, 4], nl::float32);
    nisa::dma_copy(ys, y);
    let yb = nl::ndarray([p, 16], nl::uint8);
    nisa::tensor_copy(yb, ys.view(nl::uint8));
    let bytes = nl::ndarray([p, 16], nl::uint8, buffer = nl::shared_hbm);
    nisa::dma_copy(bytes, yb);
    let high = nl::ndarray([p, 4], nl::bfloat16, buffer = nl::shared_hbm);
    nisa::dma_copy(high, y.ap([[8, p], [2, 4]], offset = 1, dtype = nl::bfloat16));
    let z = nl::ndarray([p, 4], nl::float32);
    nisa::dma_copy(z.view(nl::bfloat16), x);
    let pairs = nl::ndarray([p, 4], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(pairs, z);
    (bits, bytes, high, pairs)
}

fn bf16_bits(v: f64) -> u16 {
    ((v as f32).to_bits() >> 16) as u16
}

#[test]
fn byte_views_read_and_write_the_documented_bytes() {
    let p = 16usize;
    // bfloat16 values, exact in f32: their bits are the upper half of the f32 bits.
    let x = as_dtype(&uniform(p * 8, 3, -4.0, 4.0), Dtype::Bf16);
    let y = as_dtype(&uniform(p * 4, 5, -1e3, 1e3), Dtype::F32);
    let want_bits: Vec<f64> = x.iter().map(|&v| f64::from(bf16_bits(v) as i16)).collect();
    let want_bytes: Vec<f64> = y.iter().flat_map(|&v| (v as f32).to_le_bytes()).map(f64::from).collect();
    let want_high: Vec<f64> = y.iter().map(|&v| f64::from(f32::from_bits((v as f32).to_bits() & 0xffff_0000))).collect();
    let want_pairs: Vec<f64> =
        x.chunks(2).map(|w| f64::from(f32::from_bits(u32::from(bf16_bits(w[0])) | (u32::from(bf16_bits(w[1])) << 16)))).collect();
    let (xt, yt) = (tensor(&[p, 8], &x, Dtype::Bf16), tensor(&[p, 4], &y, Dtype::F32));
    for precision in [Precision::Hardware, Precision::Fp32] {
        let (bits, bytes, high, pairs) = byte_views::Call::new(&xt, &yt).launch(&Launch::new().precision(precision)).unwrap();
        assert_close("view int16", &bits.to_f32_vec(), &want_bits, 0.0, 0.0);
        assert_close("view uint8", &bytes.to_f32_vec(), &want_bytes, 0.0, 0.0);
        assert_close("ap dtype", &high.to_f32_vec(), &want_high, 0.0, 0.0);
        assert_close("write through view", &pairs.to_f32_vec(), &want_pairs, 0.0, 0.0);
    }
    let src = byte_views::NKI_SOURCE;
    assert!(src.contains("x.reinterpret_cast(dtype=nl.int16)") && src.contains("ys.view(dtype=nl.uint8)"), "{src}");
    assert!(src.contains("dtype=nl.bfloat16)"), "{src}");
    let pkg = common::package_of("byte_views_pkg", &[&byte_views::INFO]);
    let args = vec![vec![Arg::Tensor(vec![p, 8], x.clone(), Dtype::Bf16), Arg::Tensor(vec![p, 4], y.clone(), Dtype::F32)]];
    for precision in ["hardware", "fp32"] {
        let np = common::run_numpy_ranks(&pkg, "byte_views", &args, 1, precision).swap_remove(0);
        assert_close("numpy view int16", &np[0], &want_bits, 0.0, 0.0);
        assert_close("numpy view uint8", &np[1], &want_bytes, 0.0, 0.0);
        assert_close("numpy ap dtype", &np[2], &want_high, 0.0, 0.0);
        assert_close("numpy write through view", &np[3], &want_pairs, 0.0, 0.0);
    }
}

/// A view whose wider dtype does not divide the row: `k` bfloat16 columns as float32.
#[nki_kernel]
pub fn view_odd_columns(x: Hbm, k: i64) -> Hbm {
    let [p, _f] = x.shape();
    let out = nl::ndarray([p, 2], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out[s![.., 0..1]], x[s![.., 0..k]].view(nl::float32));
    out
}

#[test]
fn a_view_that_splits_an_element_is_an_error_naming_the_kernel_line() {
    let x = tensor(&[2, 4], &[0.0; 8], Dtype::Bf16);
    assert!(view_odd_columns::Call::new(&x, 2).launch(&Launch::new()).is_ok());
    let e = view_odd_columns::Call::new(&x, 3).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("view") && e.contains("whole float32 elements") && e.contains("tests/dsl/byte_views.rs"), "{e}");
}

/// `x` float32 `[P, F]` stored as `4·F` `float8_e4m3` elements per row (an
/// `.ap(dtype=)` view of its SBUF tile, copied by DMA into a float8 HBM tensor,
/// as a kernel packs an fp32 scale into fp8 output), returned as that tensor's
/// bytes.
#[nki_kernel]
pub fn float8_bytes(x: Hbm) -> Hbm {
    let [p, f] = x.shape();
    let t = nl::ndarray([p, f], nl::float32);
    nisa::dma_copy(t, x);
    let out = nl::ndarray([p, 4 * f], nl::float8_e4m3, buffer = nl::shared_hbm);
    nisa::dma_copy(out, t.ap([[4 * f, p], [1, 4 * f]], dtype = nl::float8_e4m3));
    let bytes = nl::ndarray([p, 4 * f], nl::uint8, buffer = nl::shared_hbm);
    nisa::dma_copy(bytes, out.view(nl::uint8));
    bytes
}

#[test]
fn float8_views_keep_every_byte_nan_codes_included() {
    // Every byte value in the three low bytes of float32 words (NaN codes
    // 0x79..=0x7f and 0xf9..=0xff among them), the high byte 0x3f.
    let bytes: Vec<u8> =
        (0..128).flat_map(|w: u32| [(w * 3 % 256) as u8, ((w * 3 + 1) % 256) as u8, ((w * 3 + 2) % 256) as u8, 0x3f]).collect();
    let words: Vec<f64> = bytes.chunks(4).map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect();
    let want: Vec<f64> = bytes.iter().map(|&b| f64::from(b)).collect();
    let x = tensor(&[2, 64], &words, Dtype::F32);
    for precision in [Precision::Hardware, Precision::Fp32] {
        let got = float8_bytes::Call::new(&x).launch(&Launch::new().precision(precision)).unwrap();
        assert_close("float8 bytes", &got.to_f32_vec(), &want, 0.0, 0.0);
    }
    let pkg = common::package_of("float8_bytes_pkg", &[&float8_bytes::INFO]);
    let args = vec![vec![Arg::Tensor(vec![2, 64], words, Dtype::F32)]];
    for precision in ["hardware", "fp32"] {
        let np = common::run_numpy_ranks(&pkg, "float8_bytes", &args, 1, precision).swap_remove(0);
        assert_close("numpy float8 bytes", &np[0], &want, 0.0, 0.0);
    }
}
