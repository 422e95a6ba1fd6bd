//! The random-number instructions, `sequence_bounds` and the version queries in
//! kernels: the emulator and the emitted kernel under the NumPy executor draw the
//! same bits, drop the same elements and move the same generator states, on trn2
//! and on trn3 (where `rand2` and the Vector engine's state instructions exist).

use crate::common;

use crate::common::{Arg, package_of, try_run_numpy_on, uniform};
use nki::hw::Generation;
use nki::prelude::*;

/// Draws from the launch seed (Vector uint16 bits, GpSimd int8 bits), reseeds
/// the Vector lanes from `seed`, drops elements of `x` with a scalar and a
/// per-partition probability, and reads the GpSimd state back; the segment
/// bounds of `ids` and `10 * nc_version + sub_version`.
#[nki_kernel]
pub fn draws(x: Hbm, #[dtypes(uint32)] seed: Hbm, probs: Hbm, #[dtypes(int32)] ids: Hbm) -> (Hbm, Hbm, Hbm, Hbm, Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let [_, n] = ids.shape();
    let bits = nl::ndarray([p, 16], nl::uint16);
    nisa::rng(bits, engine = nisa::engine::vector);
    let small = nl::ndarray([64, 8], nl::int8);
    nisa::rng(small, engine = nisa::engine::gpsimd);
    let s = nl::ndarray([1, 1], nl::uint32);
    nisa::dma_copy(s, seed);
    nisa::set_rng_seed(s);
    let xt = nl::ndarray([p, f], x.dtype());
    nisa::dma_copy(xt, x);
    let dropped = nl::ndarray([p, f], x.dtype());
    nisa::dropout(dropped, xt, 0.25);
    let pc = nl::ndarray([p, 1], nl::float32);
    nisa::dma_copy(pc, probs);
    let dropped_rows = nl::ndarray([p, f], x.dtype(), buffer = nl::psum);
    nisa::dropout(dropped_rows, xt, prob = pc);
    let state = nl::ndarray([p, 6], nl::uint32);
    nisa::rand_get_state(state);
    let it = nl::ndarray([1, n], nl::int32);
    nisa::dma_copy(it, ids);
    let b = nl::ndarray([1, 2, n], nl::int32);
    nisa::sequence_bounds(b, it);
    let v = nl::ndarray([1, 1], nl::float32);
    nisa::memset(v, 10.0 * nisa::get_nc_version() + nisa::get_nc_sub_version());
    let outs = (
        nl::ndarray([p, 16], nl::uint16, buffer = nl::shared_hbm),
        nl::ndarray([64, 8], nl::int8, buffer = nl::shared_hbm),
        nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm),
        nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm),
        nl::ndarray([p, 6], nl::uint32, buffer = nl::shared_hbm),
        nl::ndarray([1, 2, n], nl::int32, buffer = nl::shared_hbm),
        nl::ndarray([1, 1], nl::float32, buffer = nl::shared_hbm),
    );
    nisa::dma_copy(outs.0, bits);
    nisa::dma_copy(outs.1, small);
    nisa::dma_copy(outs.2, dropped);
    let rows = nl::ndarray([p, f], x.dtype());
    nisa::tensor_copy(rows, dropped_rows);
    nisa::dma_copy(outs.3, rows);
    nisa::dma_copy(outs.4, state);
    nisa::dma_copy(outs.5, b);
    nisa::dma_copy(outs.6, v);
    outs
}

/// trn3: uniform draws with scalar and per-partition bounds, then the Vector
/// lanes loaded from `state`, 32-bit draws from them, and their state read back.
#[nki_kernel(target = "trn3")]
pub fn draws_trn3(#[dtypes(uint32)] state: Hbm, lo: Hbm, hi: Hbm) -> (Hbm, Hbm, Hbm, Hbm) {
    let [p, w] = state.shape();
    let u = nl::ndarray([p, 32], nl::bfloat16);
    nisa::rand2(u, -2.0, 3.0);
    let (a, b) = (nl::ndarray([p, 1], nl::float32), nl::ndarray([p, 1], nl::float32));
    nisa::dma_copy(a, lo);
    nisa::dma_copy(b, hi);
    let ur = nl::ndarray([p, 16], nl::float32, buffer = nl::psum);
    nisa::rand2(ur, min = a, max = b);
    let st = nl::ndarray([p, w], nl::uint32);
    nisa::dma_copy(st, state);
    nisa::rand_set_state(st, engine = nisa::engine::vector);
    let bits = nl::ndarray([p, 40], nl::uint32);
    nisa::rng(bits);
    let after = nl::ndarray([p, w], nl::uint32, buffer = nl::psum);
    nisa::rand_get_state(after, engine = nisa::engine::vector);
    let outs = (
        nl::ndarray([p, 32], nl::bfloat16, buffer = nl::shared_hbm),
        nl::ndarray([p, 16], nl::float32, buffer = nl::shared_hbm),
        nl::ndarray([p, 40], nl::uint32, buffer = nl::shared_hbm),
        nl::ndarray([p, w], nl::uint32, buffer = nl::shared_hbm),
    );
    nisa::dma_copy(outs.0, u);
    let urs = nl::ndarray([p, 16], nl::float32);
    nisa::tensor_copy(urs, ur);
    nisa::dma_copy(outs.1, urs);
    nisa::dma_copy(outs.2, bits);
    let afters = nl::ndarray([p, w], nl::uint32);
    nisa::tensor_copy(afters, after);
    nisa::dma_copy(outs.3, afters);
    outs
}

/// A tensor's exact values (uint32 included).
fn exact(t: &Tensor) -> Vec<f64> {
    if t.dtype().is_float() {
        t.to_f32_vec().iter().map(|&v| f64::from(v)).collect()
    } else {
        t.to_i64_vec().iter().map(|&v| v as f64).collect()
    }
}

fn numpy(kernel: &str, info: &'static nki::emit::FunctionInfo, args: Vec<Arg>, generation: &str, precision: &str) -> Vec<Vec<f64>> {
    let pkg = package_of(&format!("{kernel}_{precision}_pkg"), &[info]);
    try_run_numpy_on(&pkg, kernel, &[args], 1, precision, generation).unwrap_or_else(|e| panic!("{e}")).swap_remove(0)
}

/// Asserts bitwise equal values; the executor writes uint32 outputs as the int32
/// of the same bits, read back here as unsigned.
fn same(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let unsigned = want.iter().any(|&v| v > f64::from(i32::MAX));
    let got: Vec<f64> = got.iter().map(|&v| if unsigned && v < 0.0 { v + 4_294_967_296.0 } else { v }).collect();
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!("{what}: element {i} is {} under NumPy but {} in the emulator", got[i], want[i]);
    }
}

#[test]
fn trn2_draws_masks_states_and_bounds_agree_bitwise_with_the_numpy_executor() {
    let (p, f, n) = (128usize, 48usize, 24usize);
    let x = uniform(p * f, 91, 0.5, 3.0);
    let probs: Vec<f64> = (0..p).map(|i| (i % 5) as f64 / 4.0).collect();
    let ids: Vec<f64> =
        [0.0, 0.0, 1.0, 1.0, 1.0, 4.0, 4.0, 0.0, 2.0, 2.0, 2.0, 2.0, 7.0, 0.0, 3.0, 3.0, 3.0, 3.0, 3.0, 9.0, 9.0, 9.0, 0.0, 5.0].to_vec();
    // Inputs reach the executor as float64 through float32 cells: a seed with its
    // low byte clear survives exactly.
    let seed = 0x1234_5600u32;
    for (precision, pname, dtype) in [(Precision::Fp32, "fp32", Dtype::F32), (Precision::Hardware, "hardware", Dtype::Bf16)] {
        let xs = common::as_dtype(&x, dtype);
        let inputs = [
            common::tensor(&[p, f], &xs, dtype),
            Tensor::from_i64(&[1, 1], &[i64::from(seed)], Dtype::U32).unwrap(),
            common::tensor(&[p, 1], &probs, Dtype::F32),
            common::tensor(&[1, n], &ids, Dtype::I32),
        ];
        let out = draws::Call::new(&inputs[0], &inputs[1], &inputs[2], &inputs[3]).launch(&Launch::new().precision(precision)).unwrap();
        let emulated = [&out.0, &out.1, &out.2, &out.3, &out.4, &out.5, &out.6].map(exact);
        let args = vec![
            Arg::Tensor(vec![p, f], xs.clone(), dtype),
            Arg::Tensor(vec![1, 1], vec![f64::from(seed)], Dtype::U32),
            Arg::Tensor(vec![p, 1], probs.clone(), Dtype::F32),
            Arg::Tensor(vec![1, n], ids.clone(), Dtype::I32),
        ];
        let np = numpy("draws", &draws::INFO, args, "trn2", pname);
        let names = ["vector bits", "gpsimd bits", "dropout", "per-row dropout", "gpsimd state", "bounds", "version"];
        for (i, name) in names.iter().enumerate() {
            same(&format!("{name} ({pname})"), &np[i], &emulated[i]);
        }
        // Dropout keeps values unscaled: each element is x or 0; rows with prob 0 keep all, prob 1 none.
        for (i, &v) in emulated[3].iter().enumerate() {
            let pr = probs[i / f];
            assert!(v == 0.0 || v == xs[i], "dropout changed a kept value");
            assert!(pr != 0.0 || v == xs[i], "row {} (prob 0) dropped an element", i / f);
            assert!(pr != 1.0 || v == 0.0, "row {} (prob 1) kept an element", i / f);
        }
        assert_eq!(emulated[6], vec![30.0], "10 * nc_version + sub_version on trn2");
    }
}

#[test]
fn trn3_uniform_draws_and_vector_states_agree_bitwise_with_the_numpy_executor() {
    let (p, w) = (128usize, 24usize);
    // Arbitrary 32-bit words from a 64-bit LCG with the low byte clear (so that
    // they reach the executor exactly through float32 cells), nonzero.
    let mut s = 0x0123_4567_89ab_cdefu64;
    let state: Vec<i64> = (0..p * w)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            i64::from(((s >> 32) as u32 & !0xff) | 0x100)
        })
        .collect();
    let lo: Vec<f64> = (0..p).map(|i| -(i as f64) / 8.0).collect();
    let hi: Vec<f64> = (0..p).map(|i| 1.0 + i as f64 / 16.0).collect();
    let inputs = [
        Tensor::from_i64(&[p, w], &state, Dtype::U32).unwrap(),
        common::tensor(&[p, 1], &lo, Dtype::F32),
        common::tensor(&[p, 1], &hi, Dtype::F32),
    ];
    for (precision, pname) in [(Precision::Fp32, "fp32"), (Precision::Hardware, "hardware")] {
        let out = draws_trn3::Call::new(&inputs[0], &inputs[1], &inputs[2])
            .launch(&Launch::new().generation(Generation::Trn3).precision(precision))
            .unwrap();
        let emulated = [&out.0, &out.1, &out.2, &out.3].map(exact);
        let args = vec![
            Arg::Tensor(vec![p, w], state.iter().map(|&v| v as f64).collect(), Dtype::U32),
            Arg::Tensor(vec![p, 1], lo.clone(), Dtype::F32),
            Arg::Tensor(vec![p, 1], hi.clone(), Dtype::F32),
        ];
        let np = numpy("draws_trn3", &draws_trn3::INFO, args, "trn3", pname);
        for (i, name) in ["rand2 scalar bounds", "rand2 column bounds", "vector bits", "vector state"].iter().enumerate() {
            same(&format!("{name} ({pname})"), &np[i], &emulated[i]);
        }
        assert!(emulated[0].iter().all(|&v| (-2.0..=3.0).contains(&v)), "rand2 left [-2, 3]");
        assert!(emulated[1].iter().enumerate().all(|(i, &v)| (lo[i / 16]..hi[i / 16]).contains(&v)), "rand2 left its row's range");
    }
}

/// The tile-level forms: reseed from `seed`, a uniform SBUF tile and an HBM one,
/// and `x` with elements dropped at rate 0.4, cast to bfloat16.
#[nki_kernel]
pub fn tile_draws(x: Hbm, #[dtypes(int32)] seed: Hbm) -> (Hbm, Hbm, Hbm) {
    let [p, f] = x.shape();
    let s = nl::load(seed);
    nl::random_seed(s);
    let a = nl::rand([p, f], nl::float32);
    let h = nl::rand([2, 8], nl::bfloat16, buffer = nl::shared_hbm);
    let d = nl::dropout(nl::load(x), 0.4, dtype = nl::bfloat16);
    let (ao, dout) =
        (nl::ndarray([p, f], nl::float32, buffer = nl::shared_hbm), nl::ndarray([p, f], nl::bfloat16, buffer = nl::shared_hbm));
    nl::store(ao, a);
    nl::store(dout, d);
    (ao, h, dout)
}

#[test]
fn tile_level_draws_agree_bitwise_with_the_numpy_executor() {
    let (p, f) = (128usize, 40usize);
    let x = uniform(p * f, 93, -2.0, 2.0);
    for (precision, pname) in [(Precision::Fp32, "fp32"), (Precision::Hardware, "hardware")] {
        let inputs = [common::tensor(&[p, f], &x, Dtype::F32), Tensor::from_i64(&[1, 1], &[42], Dtype::I32).unwrap()];
        let out = tile_draws::Call::new(&inputs[0], &inputs[1]).launch(&Launch::new().precision(precision)).unwrap();
        let emulated = [&out.0, &out.1, &out.2].map(exact);
        let args = vec![Arg::Tensor(vec![p, f], x.clone(), Dtype::F32), Arg::Tensor(vec![1, 1], vec![42.0], Dtype::I32)];
        let np = numpy("tile_draws", &tile_draws::INFO, args, "trn2", pname);
        for (i, name) in ["nl.rand sbuf", "nl.rand hbm", "nl.dropout"].iter().enumerate() {
            same(&format!("{name} ({pname})"), &np[i], &emulated[i]);
        }
        let dropped = emulated[2].iter().filter(|&&v| v == 0.0).count() as f64 / (p * f) as f64;
        assert!((dropped - 0.4).abs() < 5.0 * (0.24 / (p * f) as f64).sqrt(), "drop rate {dropped}");
    }
}
