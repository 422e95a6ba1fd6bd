//! `nki run attention-tkg`: one decode step from `.npy` files equals the float64
//! decode reference, with shapes inferred from the files; bad files give a
//! one-line error naming the flag, a non-zero exit, and write nothing.

use crate::common;

use crate::common::tkg::{Data, data, reference, run_args, shape};
use crate::common::tkg_features::{Blocks, Case, Features, as_block_cache, case};
use nki::Dtype;
use nki::io::npy::{NpyType, read_npy, write_npy};
use std::path::Path;
use std::process::{Command, Output};

fn nki_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki")
}

/// Writes `x`'s tensors as `q.npy`, `ka.npy`, `va.npy`, `kp.npy`, `vp.npy`,
/// `mask.npy` (uint8) and `sink.npy`.
fn write_files(dir: &Path, x: &Data, tp_k_prior: bool) {
    let s = x.shape;
    let n = s.bs * s.q_head * s.s_active;
    let kp = if tp_k_prior { vec![s.cache_bs, 1, s.full_sprior, s.d] } else { vec![s.cache_bs, 1, s.d, s.full_sprior] };
    let files: [(&str, Vec<usize>, &[f64], NpyType); 6] = [
        ("q.npy", vec![s.d, n], &x.q, NpyType::F32),
        ("ka.npy", vec![s.d, s.bs * s.s_active], &x.k_active, NpyType::F32),
        ("va.npy", vec![s.bs, 1, s.s_active, s.d], &x.v_active, NpyType::F32),
        ("kp.npy", kp, &x.k_prior, NpyType::F32),
        ("vp.npy", vec![s.cache_bs, 1, s.full_sprior, s.d], &x.v_prior, NpyType::F32),
        ("mask.npy", vec![s.curr_sprior, s.bs, s.q_head, s.s_active], &x.mask, NpyType::U8),
    ];
    for (name, shape, vals, ty) in files {
        write_npy(dir.join(name), &shape, vals, ty).unwrap();
    }
    if let Some(sink) = &x.sink {
        write_npy(dir.join("sink.npy"), &[s.q_head, 1], sink, NpyType::F32).unwrap();
    }
}

#[test]
fn a_decode_step_from_files_matches_float64() {
    let dir = common::scratch("cli_tkg");
    let x = data("cli tkg", shape(2, 4, 2, 384, 512, 32), true, true, Dtype::F32);
    write_files(&dir, &x, true);
    let o = nki_in(&dir, &run_args(&["--sink", "sink.npy", "--tp-k-prior", "--precision", "fp32", "--lnc", "2", "--out", "o.npy"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let written = read_npy(dir.join("o.npy")).unwrap();
    assert_eq!(written.shape, vec![2, 4, 32, 2]);
    let got: Vec<f32> = written.data.iter().map(|&v| v as f32).collect();
    common::assert_close("nki run attention-tkg", &got, &reference(&x, true), 1e-6, 1e-5);
}

#[test]
fn bad_files_are_one_line_errors_naming_the_flag_and_write_nothing() {
    let dir = common::scratch("cli_tkg_bad");
    let x = data("cli tkg bad", shape(1, 2, 1, 128, 128, 16), false, false, Dtype::F32);
    write_files(&dir, &x, false);
    for (extra, want) in [
        (&["--mask", "q.npy"][..], "--mask q.npy: invalid mask = float32: attention_tkg takes mask as uint8"),
        (&["--tp-k-prior"][..], "invalid k_prior = shape [1, 1, 16, 128]"),
        (&["--v-active", "ka.npy"][..], "--v-active ka.npy: shape [16, 1]; attention_tkg takes it as (bs, 1, s_active, d)"),
        (&["--sink", "missing.npy"][..], "--sink"),
    ] {
        let mut args = run_args(extra);
        args.extend(["--out", "o.npy"]);
        let o = nki_in(&dir, &args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: `{want}` missing from {err}");
        assert!(!dir.join("o.npy").exists(), "{extra:?} wrote an output");
    }
}

/// Writes a case's inputs as `NAME.npy` files, by parameter name.
fn write_case(dir: &Path, c: &Case) {
    for (name, shape, vals, dtype) in &c.inputs {
        let ty = match dtype {
            Dtype::U8 => NpyType::U8,
            Dtype::U32 => NpyType::U32,
            _ => NpyType::F32,
        };
        write_npy(dir.join(format!("{name}.npy")), shape, vals, ty).unwrap();
    }
}

#[test]
fn fused_rope_position_masks_layouts_and_block_caches_from_files() {
    let dir = common::scratch("cli_tkg_features");
    let tensors = ["--q", "q.npy", "--k-active", "k_active.npy", "--v-active", "v_active.npy", "--k-prior", "k_prior.npy"];
    let rest = ["--v-prior", "v_prior.npy", "--mask", "mask.npy", "--precision", "fp32", "--out", "o.npy", "--k-out", "k.npy"];
    // Fused RoPE with q / k in the HBM layouts, the mask from positions, k_out in the in-SBUF layout.
    let f = Features { rope: true, pos_id: true, qk_hbm: true, tp_k_prior: true, k_out_in_sb: true, ..Features::default() };
    let c = case("cli rope", shape(2, 2, 3, 384, 512, 32), f, Dtype::F32);
    write_case(&dir, &c);
    let flags = ["--inv-freqs", "inv_freqs.npy", "--rope-pos-ids", "rope_pos_ids.npy", "--use-pos-id", "--curr-sprior", "384"];
    let more = ["--qk-in-hbm-layout", "--k-out-in-sb", "--tp-k-prior"];
    let args: Vec<&str> = ["run", "attention-tkg"].iter().chain(&tensors).chain(&rest).chain(&flags).chain(&more).copied().collect();
    let o = nki_in(&dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bound = 1e-5 + 8.0 * 2f64.powi(-24) * c.max_angle;
    for (file, want) in [("o.npy", &c.out), ("k.npy", &c.k_out)] {
        let got: Vec<f32> = read_npy(dir.join(file)).unwrap().data.iter().map(|&v| v as f32).collect();
        common::assert_close(&format!("nki run attention-tkg {file}"), &got, want, 1e-6, bound);
    }
    // A block cache, the mask in the library's fold order (LNC 1: 384 keys, gcd(16, 3) = 1).
    let f = Features { tp_k_prior: true, out_in_sb: true, ..Features::default() };
    let c = as_block_cache(case("cli block", shape(2, 2, 1, 384, 384, 32), f, Dtype::F32), Blocks { block_len: 16, folds: (384, 1) });
    write_case(&dir, &c);
    let flags = ["--active-blocks-table", "active_blocks_table.npy", "--tp-k-prior", "--out-in-sb", "--lnc", "1"];
    let args: Vec<&str> = ["run", "attention-tkg"].iter().chain(&tensors).chain(&rest).chain(&flags).copied().collect();
    let o = nki_in(&dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<f32> = read_npy(dir.join("o.npy")).unwrap().data.iter().map(|&v| v as f32).collect();
    common::assert_close("nki run attention-tkg block cache", &got, &c.out, 1e-6, 1e-5);
}
