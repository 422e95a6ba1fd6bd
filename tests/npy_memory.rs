//! Peak memory of loading `.npy` files: the payload streams into the tensor's
//! cells, so loading costs the tensor plus one read chunk, never a copy of the
//! file or of the values. The test resets the peak resident set before each load
//! and measures it after.
//!
//! A 256 MiB float32 file must load within 1.5x its size. A bfloat16 file loads
//! into 32-bit cells (every element of every dtype sits in a 32-bit slot), so its
//! tensor is twice the file: the bound there is 1.5x the tensor, 3x the file.
//!
//! The commands keep to that: an attention command checks every header before
//! it reads a payload, so a 256 MiB input whose shape does not match the others
//! is refused without being read, and one that matches runs within 1.5x of its
//! inputs plus outputs (the child's peak resident set, from `wait4`).
//!
//! The loading test is the file's only in-process measurement, so the process's
//! peak belongs to it alone; the command test measures child processes.

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

/// A `.npy` file of `shape` float32 zeros that takes no disk (a sparse file).
fn sparse_zeros(path: &Path, shape: &[usize]) -> u64 {
    let header = header_bytes(NpyType::F32, shape);
    let len = header.len() as u64 + 4 * shape.iter().product::<usize>() as u64;
    std::fs::write(path, &header).unwrap();
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
    len
}

/// Runs `nki args` in `dir`; its exit code, stderr and peak resident set in bytes.
#[cfg(target_os = "linux")]
#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4, which also reports its peak")]
fn run_measured(dir: &Path, args: &[&str]) -> (Option<i32>, String, u64) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nki"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let (mut status, mut usage) = (0i32, std::mem::MaybeUninit::<libc::rusage>::zeroed());
    // SAFETY: waits for our own child; `usage` is written by the call.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    // SAFETY: wait4 succeeded, so it filled `usage`.
    let usage = unsafe { usage.assume_init() };
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, err, usage.ru_maxrss as u64 * 1024)
}

#[test]
#[cfg(target_os = "linux")]
fn an_attention_command_reads_no_payload_it_refuses_and_runs_within_its_data() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("npy_memory_cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Ring forward: a 256 MiB q whose sequence length is not k's and v's.
    let q = sparse_zeros(&dir.join("q.npy"), &[1, 4, 131_072, 128]);
    for name in ["k.npy", "v.npy"] {
        sparse_zeros(&dir.join(name), &[1, 4, 256, 128]);
    }
    let fwd = ["run", "ring-fwd", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--workers", "2", "--out", "o.npy"];
    let (code, err, peak) = run_measured(&dir, &fwd);
    eprintln!("ring-fwd, mismatched {} MiB q: peak RSS {} MiB", q / MIB, peak / MIB);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("error: --k has shape [1, 4, 256, 128] but --q has [1, 4, 131072, 128]") && err.lines().count() == 1, "{err}");
    assert!(peak < q / 8, "refusing the mismatched input took {} MiB", peak / MIB);
    assert!(!dir.join("o.npy").exists());
    // Decode attention over a 2 x 128 MiB KV cache, of which the step reads 128 positions.
    let (d, full) = (64usize, 1usize << 19);
    let mut data = 0;
    for (name, shape) in [
        ("tq.npy", vec![d, 2]),
        ("ka.npy", vec![d, 1]),
        ("va.npy", vec![1, 1, 1, d]),
        ("kp.npy", vec![1, 1, d, full]),
        ("vp.npy", vec![1, 1, full, d]),
    ] {
        data += sparse_zeros(&dir.join(name), &shape);
    }
    std::fs::write(dir.join("mask.npy"), [header_bytes(NpyType::U8, &[128, 1, 2, 1]), vec![1u8; 256]].concat()).unwrap();
    let out_bytes = 4 * 2 * d as u64;
    let tkg = common::tkg::run_args(&["--q", "tq.npy", "--out", "to.npy"]);
    let (code, err, peak) = run_measured(&dir, &tkg);
    let io = data + out_bytes;
    eprintln!("attention-tkg: inputs + outputs {} MiB, peak RSS {} MiB ({:.2}x)", io / MIB, peak / MIB, peak as f64 / io as f64);
    assert_eq!(code, Some(0), "{err}");
    assert!((peak as f64) <= 1.5 * io as f64, "attention-tkg peaked at {} MiB for {} MiB of inputs and outputs", peak / MIB, io / MIB);
    std::fs::remove_dir_all(dir).unwrap();
}
