//! Peak memory of loading `.npy` files: the payload streams into the tensor's
//! cells, so loading costs the tensor plus one read chunk, never a copy of the
//! file or of the values. The test resets the peak resident set before each load
//! and measures it after.
//!
//! A 256 MiB float32 file must load within 1.5x its size. A bfloat16 file loads
//! into 32-bit cells (every element of every dtype sits in a 32-bit slot), so its
//! tensor is twice the file: the bound there is 1.5x the tensor, 3x the file.
//!
//! This file holds one test so the process's peak belongs to it alone.

mod common;

use common::status_bytes;
use nki::io::npy::{NpyType, header_bytes, read_tensor_npy};
use nki::{Dtype, Tensor};
use std::io::Write;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// Writes `n` elements of `ty`, element `i` holding `i % 251`, a chunk at a time.
fn write_streamed(path: &Path, ty: NpyType, n: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&header_bytes(ty, &[n])).unwrap();
    let mut chunk = Vec::with_capacity(1 << 20);
    for i in 0..n {
        let v = (i % 251) as f32;
        match ty {
            NpyType::F32 => chunk.extend_from_slice(&v.to_le_bytes()),
            // Integers below 256 are exact in bfloat16: the upper half of their f32 bits.
            NpyType::Bf16 => chunk.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes()),
            _ => unreachable!("the test writes float32 and bfloat16"),
        }
        if chunk.len() >= 1 << 20 {
            f.write_all(&chunk).unwrap();
            chunk.clear();
        }
    }
    f.write_all(&chunk).unwrap();
}

/// Loads `path`, checks a few values, and returns the peak growth of the resident set.
fn peak_of_loading(path: &Path, n: usize, dtype: Dtype) -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak resident set (Linux >= 4.0)");
    let before = status_bytes("VmRSS");
    let t: Tensor = read_tensor_npy(path).expect("loading");
    let peak = status_bytes("VmHWM");
    assert_eq!((t.shape(), t.dtype()), (&[n][..], dtype));
    let view = |i: usize| t.index(&nki::s![i..i + 1]).unwrap().to_f32_vec()[0];
    for i in [0, 1, 250, 251, n / 2, n - 1] {
        assert_eq!(view(i), (i % 251) as f32, "element {i}");
    }
    peak.saturating_sub(before)
}

#[test]
#[cfg(target_os = "linux")]
fn loading_costs_the_tensor_and_one_chunk() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("npy_memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = (256 * MIB / 4) as usize;
    let cases = [(NpyType::F32, Dtype::F32, 1.5), (NpyType::Bf16, Dtype::Bf16, 3.0)];
    for (ty, dtype, bound) in cases {
        let path = dir.join(format!("{ty:?}.npy"));
        write_streamed(&path, ty, n);
        let file = std::fs::metadata(&path).unwrap().len();
        let grown = peak_of_loading(&path, n, dtype);
        std::fs::remove_file(&path).unwrap();
        eprintln!(
            "{ty:?}: file {} MiB, peak growth while loading {} MiB ({:.2}x the file)",
            file / MIB,
            grown / MIB,
            grown as f64 / file as f64
        );
        assert!(
            (grown as f64) <= bound * file as f64,
            "{ty:?}: loading a {} MiB file grew the resident set by {} MiB",
            file / MIB,
            grown / MIB
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}
