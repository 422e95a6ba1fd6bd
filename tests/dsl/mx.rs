//! `nisa::quantize_mx` and `nisa::nc_matmul_mx` in a trn3 kernel: the emulator
//! and the emitted kernel under the NumPy executor agree, and both stay within
//! the MX quantization error of the float64 product.

use crate::common::{Arg, as_dtype, as_f32, assert_close, package_of, tensor, try_run_numpy_on, uniform};
use nki::prelude::*;

/// `a` `[K, 4M]` and `b` `[K, 4N]` (bf16) quantized to MXFP8 (e4m3 with
/// float8_e8m0fnu scales, e5m2 with uint8 scales) and multiplied:
/// `out[m, n] = sum over k, j of a[k, 4m + j] b[k, 4n + j]`.
#[nki_kernel(target = "trn3")]
pub fn mx_product(a: Hbm, b: Hbm) -> Hbm {
    let [k, fa] = a.shape();
    let [_, fb] = b.shape();
    let sa = nl::ndarray([k, fa], nl::bfloat16);
    let sb = nl::ndarray([k, fb], nl::bfloat16);
    nisa::dma_copy(sa, a);
    nisa::dma_copy(sb, b);
    let qa = nl::ndarray([k, fa / 4], nl::float8_e4m3fn_x4);
    let qb = nl::ndarray([k, fb / 4], nl::float8_e5m2_x4);
    // Scales of data over several quadrants keep the data's partitions (4 of each 32 used).
    let ea = nl::ndarray([k, fa / 4], nl::float8_e8m0fnu);
    let eb = nl::ndarray([k, fb / 4], nl::uint8);
    nisa::quantize_mx(qa, sa, ea);
    nisa::quantize_mx(dst = qb, src = sb, dst_scale = eb);
    let acc = nl::ndarray([fa / 4, fb / 4], nl::float32, buffer = nl::psum);
    nisa::nc_matmul_mx(acc, qa, qb, ea, eb);
    let res = nl::ndarray([fa / 4, fb / 4], nl::float32);
    nisa::tensor_copy(res, acc);
    let out = nl::ndarray([fa / 4, fb / 4], nl::float32, buffer = nl::shared_hbm);
    nisa::dma_copy(out, res);
    out
}

#[test]
fn mx_product_agrees_with_numpy_and_the_float64_product() {
    let (k, m, n) = (64usize, 16usize, 32usize);
    let a = as_dtype(&uniform(k * m * 4, 97, -3.0, 3.0), Dtype::Bf16);
    let b = as_dtype(&uniform(k * n * 4, 98, -0.5, 0.5), Dtype::Bf16);
    let launch = Launch::new().generation(nki::hw::Generation::Trn3);
    let got = mx_product::Call::new(&tensor(&[k, 4 * m], &a, Dtype::Bf16), &tensor(&[k, 4 * n], &b, Dtype::Bf16)).launch(&launch).unwrap();
    let got = got.to_f32_vec();
    for r in 0..m {
        for c in 0..n {
            let (ar, br) = (&a, &b);
            let terms = || (0..k).flat_map(move |kk| (0..4).map(move |j| ar[kk * 4 * m + 4 * r + j] * br[kk * 4 * n + 4 * c + j]));
            let (exact, mag): (f64, f64) = (terms().sum(), terms().map(f64::abs).sum());
            // e4m3 elements within 2^-4 relative, e5m2 within 2^-3 (plus subnormal steps).
            let g = f64::from(got[r * n + c]);
            assert!((g - exact).abs() <= mag * (2f64.powi(-4) + 2f64.powi(-3) + 2f64.powi(-6)), "({r}, {c}): got {g}, exact {exact}");
        }
    }
    let pkg = package_of("mx_pkg", &[&mx_product::INFO]);
    let args = vec![Arg::Tensor(vec![k, 4 * m], a, Dtype::Bf16), Arg::Tensor(vec![k, 4 * n], b, Dtype::Bf16)];
    let np = try_run_numpy_on(&pkg, "mx_product", &[args], 1, "hardware", "trn3").map(as_f32).unwrap().swap_remove(0);
    // The same quantized values and scales; only the float32 summation order may differ.
    assert_close("numpy vs emulator", &np[0], &got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-5, 1e-5);
}

#[test]
fn a_profiled_launch_records_the_mx_instructions_on_their_engines() {
    use nki::profile::{Target, Unit};
    let a = tensor(&[32, 64], &uniform(32 * 64, 99, -1.0, 1.0), Dtype::Bf16);
    let launch = Launch::new().generation(nki::hw::Generation::Trn3).profile(Target::Trn3);
    mx_product::Call::new(&a, &a).launch(&launch).unwrap();
    let p = launch.profiled().unwrap();
    let ops: Vec<_> = p.timeline.slices.iter().flatten().map(|s| (s.op, s.unit)).collect();
    assert!(ops.contains(&("nisa.quantize_mx", Unit::Vector)), "{ops:?}");
    assert!(ops.contains(&("nisa.nc_matmul_mx", Unit::Tensor)), "{ops:?}");
}
