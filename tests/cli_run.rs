//! `nki run KERNEL` / `nki profile KERNEL`: every registered kernel runs from the
//! command line on generated `.npy` inputs and writes exactly what the Rust API
//! returns for the same inputs; every one profiles; refused inputs give one line
//! naming the parameter, exit code 2 and no output.

mod common;

use nki::emit::{ArgValue, FunctionInfo};
use nki::examples::{layernorm::layernorm, topk::topk};
use nki::io::npy::{NpyType, read_npy, read_tensor_npy, write_npy};
use nki::{Launch, Tensor};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A generated input: a float32 tensor of uniform values in `[-1, 1)`, an int32
/// tensor of values in `[0, max)`, or a scalar as text.
#[derive(Clone, Copy)]
enum In {
    F32(&'static [usize]),
    Ids(&'static [usize], u32),
    /// A uint8 mask of random 0s and 1s.
    Mask(&'static [usize]),
    Text(&'static str),
}

/// One command-line case per registered kernel: its ranks and parameters.
struct Case {
    kernel: &'static str,
    ranks: usize,
    params: &'static [(&'static str, In)],
}

use In::{F32, Ids, Mask, Text};

const QKV: &[usize] = &[1, 1, 64, 128];

/// Kernels only trn3 has the instructions of: run with `--target trn3`.
const TRN3_ONLY: &[&str] = &["temperature_softmax"];

/// The generation a case runs on.
fn target_of(case: &Case) -> &'static str {
    if TRN3_ONLY.contains(&case.kernel) { "trn3" } else { "trn2" }
}

const CASES: &[Case] = &[
    Case { kernel: "axpy", ranks: 1, params: &[("x", F32(&[128, 64])), ("y", F32(&[128, 64])), ("alpha", Text("0.5"))] },
    Case { kernel: "cumsum", ranks: 1, params: &[("x", F32(&[128, 300]))] },
    Case { kernel: "dropout", ranks: 1, params: &[("x", F32(&[128, 64])), ("seed", Ids(&[1, 1], 1000)), ("rate", Text("0.25"))] },
    Case { kernel: "embedding", ranks: 1, params: &[("table", F32(&[200, 64])), ("ids", Ids(&[128, 1], 200))] },
    Case { kernel: "gemm_bias_gelu", ranks: 1, params: &[("x", F32(&[128, 128])), ("w", F32(&[128, 128])), ("bias", F32(&[1, 128]))] },
    Case {
        kernel: "layernorm",
        ranks: 1,
        params: &[("x", F32(&[128, 64])), ("gamma", F32(&[1, 64])), ("beta", F32(&[1, 64])), ("eps", Text("0.01"))],
    },
    Case { kernel: "logsumexp", ranks: 1, params: &[("x", F32(&[128, 1024]))] },
    Case { kernel: "mamba_v1", ranks: 1, params: MAMBA },
    Case { kernel: "mamba_v2", ranks: 1, params: MAMBA },
    Case { kernel: "mamba_v3", ranks: 1, params: MAMBA_TILED },
    Case { kernel: "masked_softmax", ranks: 1, params: &[("x", F32(&[128, 64])), ("mask", F32(&[128, 64])), ("scale", Text("0.5"))] },
    Case { kernel: "matmul", ranks: 1, params: &[("a_t", F32(&[128, 128])), ("b", F32(&[128, 512]))] },
    Case { kernel: "matmul_k_outer", ranks: 1, params: &[("a_t", F32(&[128, 128])), ("b", F32(&[128, 1024]))] },
    Case { kernel: "matmul_hoisted", ranks: 1, params: &[("a_t", F32(&[128, 128])), ("b", F32(&[128, 512]))] },
    Case {
        kernel: "matmul_blocked",
        ranks: 1,
        params: &[("a_t", F32(&[128, 256])), ("b", F32(&[128, 512])), ("tiles_m", Text("2")), ("tiles_n", Text("1"))],
    },
    Case { kernel: "rmsnorm", ranks: 1, params: &[("x", F32(&[128, 64])), ("w", F32(&[1, 64]))] },
    Case {
        kernel: "rmsnorm_quant_kernel",
        ranks: 1,
        params: &[
            ("hidden", F32(&[1, 4, 64])),
            ("ln_w", F32(&[64])),
            ("kargs.eps", Text("1e-5")),
            ("kargs.lower_bound", Text("0.5")),
            ("kargs.norm_type", Text("RMS_NORM")),
        ],
    },
    Case {
        kernel: "RoPE",
        ranks: 1,
        params: &[
            ("x_in", F32(&[64, 1, 2, 8])),
            ("cos", F32(&[32, 1, 8])),
            ("sin", F32(&[32, 1, 8])),
            ("contiguous_layout", Text("false")),
        ],
    },
    Case {
        kernel: "router_topk",
        ranks: 1,
        params: &[
            ("x", F32(&[128, 16])),
            ("w", F32(&[128, 32])),
            ("w_bias", F32(&[1, 32])),
            ("router_logits", F32(&[16, 32])),
            ("expert_affinities", F32(&[16, 32])),
            ("expert_index", Ids(&[16, 4], 32)),
            ("act_fn", Text("SOFTMAX")),
            ("k", Text("4")),
            ("x_hbm_layout", Text("0")),
            ("x_sb_layout", Text("0")),
            ("router_pre_norm", Text("false")),
        ],
    },
    Case {
        kernel: "rotational_topk",
        ranks: 1,
        // k = 16 over trn2's 2 programs: 2 rows each, 2 stages of 500 columns finding 8 each.
        params: &[
            ("inp", F32(&[4, 1000])),
            ("config.BxS", Text("4")),
            ("config.vocab_size", Text("1000")),
            ("config.orig_k", Text("16")),
            ("config.padded_k", Text("16")),
            ("config.n_prgs", Text("2")),
            ("config.prg_id", Text("0")),
            ("config.per_lnc_BxS", Text("2")),
            ("config.local_top_k_per_stage", Text("8")),
            ("config.n_stages", Text("2")),
            ("config.stage_free_size", Text("500")),
            ("config.padded_vocab_size", Text("1000")),
            ("config.sorted", Text("true")),
            ("config.tile_size", Text("2")),
            ("config.n_bxs_tiles", Text("1")),
        ],
    },
    Case { kernel: "softmax", ranks: 1, params: &[("x", F32(&[128, 96]))] },
    Case { kernel: "temperature_softmax", ranks: 1, params: &[("x", F32(&[128, 64])), ("inv_temp", Text("2.0"))] },
    Case { kernel: "tensor_add", ranks: 1, params: &[("a", F32(&[128, 64])), ("b", F32(&[128, 64]))] },
    Case { kernel: "topk", ranks: 1, params: &[("x", F32(&[128, 64])), ("k", Text("8"))] },
    Case { kernel: "tp_matmul", ranks: 4, params: &[("x_t", F32(&[32, 512])), ("w1", F32(&[128, 128])), ("w2", F32(&[128, 512]))] },
    Case { kernel: "transpose", ranks: 1, params: &[("x", F32(&[128, 256]))] },
    Case {
        kernel: "attention_cte",
        ranks: 1,
        params: &[("q", F32(&[1, 128, 16])), ("k", F32(&[1, 16, 128])), ("v", F32(&[1, 128, 16])), ("causal_mask", Text("false"))],
    },
    Case {
        kernel: "attention_tkg",
        ranks: 1,
        params: &[
            ("q", F32(&[64, 2])),
            ("k_active", F32(&[64, 1])),
            ("v_active", F32(&[1, 1, 1, 64])),
            ("k_prior", F32(&[1, 1, 64, 128])),
            ("v_prior", F32(&[1, 1, 128, 64])),
            ("mask", Mask(&[128, 1, 2, 1])),
            ("cfg.bs", Text("1")),
            ("cfg.q_head", Text("2")),
            ("cfg.s_active", Text("1")),
            ("cfg.curr_sprior", Text("128")),
            ("cfg.full_sprior", Text("128")),
            ("cfg.d_head", Text("64")),
            ("cfg.qk_in_sb", Text("true")),
        ],
    },
    Case {
        kernel: "ring_attention_spmd_fwd",
        ranks: 2,
        params: &[
            ("q", F32(QKV)),
            ("k", F32(QKV)),
            ("v", F32(&[1, 1, 128, 64])),
            ("num_workers", Text("2")),
            ("training", Text("true")),
            ("lse_dtype", Text("bfloat16")),
        ],
    },
    Case {
        kernel: "ring_attention_spmd_bwd",
        ranks: 1,
        params: &[
            ("q_ref", F32(QKV)),
            ("k_ref", F32(QKV)),
            ("v_ref", F32(QKV)),
            ("o_ref", F32(QKV)),
            ("dy_ref", F32(QKV)),
            ("lse_ref", F32(&[1, 1, 128, 1])),
            ("lnc_size", Text("2")),
        ],
    },
];

const MAMBA: &[(&str, In)] = &[
    ("delta", F32(&[1, 128, 256])),
    ("u", F32(&[1, 128, 256])),
    ("a", F32(&[128, 2])),
    ("b", F32(&[1, 2, 256])),
    ("c", F32(&[1, 2, 256])),
];

const MAMBA_TILED: &[(&str, In)] = &[
    ("delta", F32(&[1, 128, 256])),
    ("u", F32(&[1, 128, 256])),
    ("a", F32(&[128, 2])),
    ("b", F32(&[1, 2, 256])),
    ("c", F32(&[1, 2, 256])),
    ("seq_tile", Text("128")),
];

fn nki_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The file a generated tensor input is written to (`{rank}` in a per-rank pattern).
fn file_name(kernel: &str, param: &str, rank: Option<usize>) -> String {
    match rank {
        Some(r) => format!("{kernel}.{param}.{r}.npy"),
        None => format!("{kernel}.{param}.npy"),
    }
}

/// Writes the case's inputs under `dir` (one file per rank for tensors of a
/// multi-rank case) and returns the command-line flags naming them.
fn write_inputs(dir: &Path, case: &Case) -> Vec<String> {
    let mut flags = Vec::new();
    for (i, (param, input)) in case.params.iter().enumerate() {
        flags.push(format!("--{}", param.replace('_', "-")));
        let seed = common::seed_of(case.kernel) + i as u64;
        let write = |rank: Option<usize>, seed: u64| {
            let path = dir.join(file_name(case.kernel, param, rank));
            match *input {
                F32(shape) => write_npy(&path, shape, &common::uniform(shape.iter().product(), seed, -1.0, 1.0), NpyType::F32).unwrap(),
                Ids(shape, max) => {
                    let ids: Vec<f64> =
                        common::uniform(shape.iter().product(), seed, 0.0, f64::from(max)).iter().map(|v| v.floor()).collect();
                    write_npy(&path, shape, &ids, NpyType::I32).unwrap();
                }
                Mask(shape) => {
                    let bits: Vec<f64> = common::uniform(shape.iter().product(), seed, 0.0, 2.0).iter().map(|v| v.floor()).collect();
                    write_npy(&path, shape, &bits, NpyType::U8).unwrap();
                }
                Text(_) => unreachable!("scalars are not files"),
            }
        };
        match *input {
            Text(t) => flags.push(t.to_string()),
            _ if case.ranks == 1 => {
                write(None, seed);
                flags.push(file_name(case.kernel, param, None));
            }
            _ => {
                (0..case.ranks).for_each(|r| write(Some(r), seed + 100 * r as u64));
                flags.push(format!("{}.{param}.{{rank}}.npy", case.kernel));
            }
        }
    }
    flags
}

/// The case's outputs per rank from the Rust API: the kernel's registry entry
/// called in-process on the same files.
fn rust_outputs(dir: &Path, case: &Case, info: &FunctionInfo) -> Vec<Vec<Tensor>> {
    let args: Vec<Vec<Option<ArgValue>>> = (0..case.ranks)
        .map(|rank| {
            info.params
                .iter()
                .map(|p| {
                    let (_, input) = case.params.iter().find(|(n, _)| *n == p.name)?;
                    Some(match *input {
                        Text(t) => match p.kind {
                            nki::emit::ParamKind::Int => ArgValue::Int(t.parse().unwrap()),
                            nki::emit::ParamKind::Float => ArgValue::Float(t.parse().unwrap()),
                            nki::emit::ParamKind::Bool => ArgValue::Bool(t.parse().unwrap()),
                            nki::emit::ParamKind::Dtype => ArgValue::Dtype(nki::Dtype::from_python_name(t).unwrap()),
                            nki::emit::ParamKind::Enum { .. } => ArgValue::Member(t.to_string()),
                            other => panic!("no text case for {other:?}"),
                        },
                        _ => {
                            let r = (case.ranks > 1).then_some(rank);
                            ArgValue::Tensor(read_tensor_npy(dir.join(file_name(case.kernel, p.name, r))).unwrap())
                        }
                    })
                })
                .collect()
        })
        .collect();
    let entry = info.entry.expect("a kernel's entry");
    let generation = nki::profile::Target::parse(target_of(case)).unwrap();
    // `nki run` launches on the target's default LNC (2 on trn2 and trn3).
    Launch::new().generation(generation).lnc(2).ranks(case.ranks).run_ranks(|ctx| entry(ctx, &args[ctx.rank()])).unwrap()
}

#[test]
fn every_registered_kernel_runs_from_the_command_line_as_from_rust() {
    let dir = common::scratch("cli_run_all");
    let registered: Vec<&str> = nki::registry().iter().filter(|k| k.entry.is_some()).map(|k| k.name).collect();
    let cased: Vec<&str> = CASES.iter().map(|c| c.kernel).collect();
    assert_eq!(registered.iter().filter(|k| !cased.contains(k)).collect::<Vec<_>>(), Vec::<&&str>::new(), "kernels without a case");
    for case in CASES {
        let info = nki::registry().into_iter().find(|k| k.name == case.kernel).unwrap();
        let flags = write_inputs(&dir, case);
        let out = dir.join(case.kernel);
        std::fs::create_dir(&out).unwrap();
        let ranks = case.ranks.to_string();
        let mut args = vec!["run", case.kernel, "--out", case.kernel, "--ranks", &ranks, "--target", target_of(case)];
        args.extend(flags.iter().map(String::as_str));
        let o = nki_in(&dir, &args);
        assert!(o.status.success(), "{}: {}", case.kernel, stderr(&o));
        let want = rust_outputs(&dir, case, info);
        let mut files = 0;
        for (rank, outs) in want.iter().enumerate() {
            for (i, t) in outs.iter().enumerate() {
                let name = if case.ranks == 1 { format!("out{i}.npy") } else { format!("out{i}.rank{rank}.npy") };
                let got = read_npy(out.join(&name)).unwrap_or_else(|e| panic!("{}: {name}: {e}", case.kernel));
                assert_eq!(got.shape, t.shape(), "{} {name}", case.kernel);
                let want: Vec<f64> = t.to_f32_vec().into_iter().map(f64::from).collect();
                assert!(got.data == want, "{} {name}: the file differs from the Rust API's result", case.kernel);
                files += 1;
            }
        }
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), files, "{}: exactly the outputs are written", case.kernel);

        // The same inputs profile.
        let mut prof = vec!["profile", case.kernel, "--json", "--ranks", &ranks, "--target", target_of(case)];
        prof.extend(flags.iter().map(String::as_str));
        let o = nki_in(&dir, &prof);
        assert!(o.status.success(), "profile {}: {}", case.kernel, stderr(&o));
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(report["estimated_seconds"].as_f64().unwrap() > 0.0, "{}: {report}", case.kernel);
        assert!(report["instructions"].as_u64().unwrap() > 0, "{}: {report}", case.kernel);
    }
}

#[test]
fn the_registry_entry_runs_the_typed_api_with_defaults_and_overrides() {
    let x = common::tensor(&[128, 64], &common::uniform(128 * 64, 5, -1.0, 1.0), nki::Dtype::F32);
    let row = common::tensor(&[1, 64], &common::uniform(64, 6, 0.5, 1.5), nki::Dtype::F32);
    let launch = Launch::new();
    let run = |info: &FunctionInfo, args: Vec<Option<ArgValue>>| launch.run(|ctx| (info.entry.unwrap())(ctx, &args)).unwrap();
    let t = |t: &Tensor| Some(ArgValue::Tensor(t.clone()));
    // `eps` omitted takes the Python default; given, it is passed on.
    for (eps, want) in [(None, layernorm::Call::new(&x, &row, &row)), (Some(0.5), layernorm::Call::new(&x, &row, &row).eps(0.5))] {
        let got = run(&layernorm::INFO, vec![t(&x), t(&row), t(&row), eps.map(ArgValue::Float)]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].to_f32_vec(), want.launch(&launch).unwrap().to_f32_vec());
    }
    // A tuple result is the outputs in order.
    let got = run(&topk::INFO, vec![t(&x), Some(ArgValue::Int(8))]);
    let (values, indices) = topk::Call::new(&x, 8).launch(&launch).unwrap();
    assert_eq!((got[0].to_f32_vec(), got[1].to_f32_vec()), (values.to_f32_vec(), indices.to_f32_vec()));
    // A value of the wrong kind is refused naming the parameter.
    let e = launch.run(|ctx| (topk::INFO.entry.unwrap())(ctx, &[t(&x), Some(ArgValue::Float(4.5))])).unwrap_err();
    assert_eq!(e.to_string(), "invalid k = 4.5: k takes an int");
    assert_eq!(layernorm::INFO.params[3].default, Some("1e-5"));
}

/// Runs `kernel`'s case with each `(extra flags, expected error parts)` of
/// `refusals` (an extra flag replaces the case's own): each is refused in one
/// line with exit code 2 and writes nothing. Returns the scratch directory.
fn assert_refused(kernel: &str, refusals: &[(&[&str], &[&str])]) -> PathBuf {
    let dir = common::scratch(&format!("cli_run_bundle_{kernel}"));
    std::fs::create_dir(dir.join("out")).unwrap();
    let case = CASES.iter().find(|c| c.kernel == kernel).unwrap();
    let flags = write_inputs(&dir, case);
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["run", kernel, "--out", "out"];
        // The case's flag-value pairs, less those `extra` overrides.
        let kept = flags.chunks(2).filter(|pair| !extra.iter().any(|e| e.split('=').next() == Some(pair[0].as_str())));
        args.extend(kept.flatten().map(String::as_str));
        args.extend(extra);
        nki_in(&dir, &args)
    };
    for (extra, want) in refusals {
        let before = files(&dir);
        let o = run(extra);
        let err = stderr(&o);
        assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{extra:?}: {err}");
        for w in *want {
            assert!(err.contains(w), "{extra:?}: `{w}` missing from {err}");
        }
        assert!(files(&dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 0, "{extra:?} wrote something");
    }
    dir
}

#[test]
fn a_configuration_object_is_given_field_by_field() {
    let refusals: &[(&[&str], &[&str])] = &[
        (&["--cfg.fuse-rope"], &["attention_tkg refused its inputs", "cfg.fuse_rope=True is not implemented"]),
        (&["--cfg.block-len", "16"], &["cfg.block_len=16 (a block KV cache) is not implemented"]),
        (&["--cfg.qk-in-sb=false"], &["cfg.qk_in_sb=False"]),
        (&["--cfg.bss", "1"], &["--cfg.bss is not a parameter of attention_tkg", "did you mean --cfg.bs?"]),
        (&["--cfg.q-head=two"], &["--cfg.q-head two: expected an int"]),
    ];
    let dir = assert_refused("attention_tkg", refusals);
    let help = nki_in(&dir, &["run", "attention_tkg", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for w in
        ["--cfg.bs VALUE", "an int, a field of AttnTKGConfig (default 0)", "--cfg.strided-mm1 VALUE", "(default True)", "--cfg.FIELD VALUE"]
    {
        assert!(help.status.success() && text.contains(w), "`{w}` missing from {text}");
    }
}

#[test]
fn a_refused_kargs_field_value_is_named() {
    let refusals: &[(&[&str], &[&str])] = &[
        (
            &["--kargs.norm-type", "LAYER_NORM"],
            &[
                "rmsnorm_quant_kernel refused its inputs",
                "kargs.norm_type must be NormType.NO_NORM or NormType.RMS_NORM (the members implemented), got kargs.norm_type = NormType.LAYER_NORM",
            ],
        ),
        (&["--kargs.quantization-type=ROW_MX"], &["got kargs.quantization_type = QuantizationType.ROW_MX"]),
        // A member's value, or a name the enum lacks, is no member: the members are listed.
        (
            &["--kargs.norm-type", "1"],
            &["--kargs.norm-type 1: expected a NormType member: NO_NORM, RMS_NORM, LAYER_NORM, RMS_NORM_SKIP_GAMMA"],
        ),
        (&["--kargs.quantization-type=rows"], &["expected a QuantizationType member: NONE, STATIC, ROW, MX, STATIC_MX, ROW_MX"]),
        (&["--kargs.lower-bound", "-0.5"], &["kargs.lower_bound must be non-negative, got kargs.lower_bound = -0.5"]),
        (&["--kargs.quantization-type=STATIC"], &["input_dequant_scale must be given for static quantization"]),
        // The former keyword parameter: the fields are flags of `kargs` now.
        (&["--eps", "1e-5"], &["--eps is not a parameter of rmsnorm_quant_kernel", "--kargs.lower-bound --kargs.norm-type"]),
    ];
    let dir = assert_refused("rmsnorm_quant_kernel", refusals);
    let help = nki_in(&dir, &["run", "rmsnorm_quant_kernel", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for w in [
        "--kargs.norm-type VALUE",
        "a NormType member: NO_NORM|RMS_NORM|LAYER_NORM|RMS_NORM_SKIP_GAMMA, a field of RmsNormQuantKernelArgs (default NormType.RMS_NORM)",
        "--kargs.eps VALUE",
        "(default 1e-6)",
    ] {
        assert!(help.status.success() && text.contains(w), "`{w}` missing from {text}");
    }
}

#[test]
fn a_config_that_is_not_the_plan_for_the_input_is_refused() {
    let refusals: &[(&[&str], &[&str])] = &[
        (
            &["--config.n-stages", "4"],
            &["rotational_topk refused its inputs", "config.n_stages = 4, the plan for inp [BxS, V], orig_k, n_prgs is 2"],
        ),
        (&["--config.BxS", "8"], &["config.BxS = 8 disagrees with inp, which has 4 rows"]),
        (&["--config.n-prgs", "1"], &["config.n_prgs = 1 disagrees with the launch, which runs 2 program(s)"]),
    ];
    assert_refused("rotational_topk", refusals);
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), if p.is_dir() { Vec::new() } else { std::fs::read(&p).unwrap() }))
        .collect();
    all.sort();
    all
}

#[test]
fn refused_inputs_name_the_parameter_exit_2_and_write_nothing() {
    let dir = common::scratch("cli_run_refused");
    std::fs::create_dir(dir.join("out")).unwrap();
    write_npy(dir.join("x.npy"), &[128, 64], &common::uniform(128 * 64, 1, -1.0, 1.0), NpyType::F32).unwrap();
    write_npy(dir.join("short.npy"), &[100, 64], &common::uniform(100 * 64, 2, -1.0, 1.0), NpyType::F32).unwrap();
    write_npy(dir.join("ids.npy"), &[128, 1], &[0.5; 128], NpyType::F32).unwrap();
    std::fs::write(dir.join("junk.npy"), b"not an array").unwrap();
    write_npy(dir.join("xi.npy"), &[64, 1, 1, 8], &[1.0; 512], NpyType::I32).unwrap();
    write_npy(dir.join("angles.npy"), &[32, 1, 8], &[0.5; 256], NpyType::F32).unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["run", "cumsum", "--xx", "x.npy", "--out", "out"], &["--xx is not a parameter of cumsum", "did you mean --x?"]),
        (&["run", "cumsun", "--x", "x.npy", "--out", "out"], &["unknown kernel 'cumsun'", "did you mean 'cumsum'?"]),
        (&["run", "tensor_add", "--a", "x.npy", "--out", "out"], &["tensor_add requires --b"]),
        (&["run", "cumsum", "--x", "missing.npy", "--out", "out"], &["--x missing.npy"]),
        (&["run", "cumsum", "--x", "junk.npy", "--out", "out"], &["--x", "junk.npy"]),
        (
            &["run", "tensor_add", "--a", "x.npy", "--b", "short.npy", "--out", "out"],
            &["tensor_add refused its inputs", "--b short.npy: float32 [100, 64]", "same shape"],
        ),
        (&["run", "cumsum", "--x", "x.npy", "--axis", "0", "--out", "out"], &["cumsum refused its inputs", "got axis = 0"]),
        (&["run", "embedding", "--table", "x.npy", "--ids", "ids.npy", "--out", "out"], &["--ids ids.npy: float32 [128, 1]", "integer"]),
        (&["run", "topk", "--x", "x.npy", "--k", "two", "--out", "out"], &["--k two: expected an int"]),
        (
            &[
                "run",
                "router_topk",
                "--x",
                "x.npy",
                "--w",
                "x.npy",
                "--router-logits",
                "x.npy",
                "--expert-affinities",
                "x.npy",
                "--expert-index",
                "x.npy",
                "--act-fn",
                "1",
                "--k",
                "4",
                "--x-hbm-layout",
                "0",
                "--x-sb-layout",
                "0",
                "--out",
                "out",
            ],
            &["--act-fn 1: expected a RouterActFnType member: SIGMOID, SOFTMAX"],
        ),
        (
            &["run", "RoPE", "--x-in", "xi.npy", "--cos", "angles.npy", "--sin", "angles.npy", "--out", "out"],
            &["--x-in xi.npy: int32 [64, 1, 1, 8]", "invalid x_in = int32: RoPE takes x_in as float32, bfloat16 or float16"],
        ),
        (&["run", "cumsum", "--x", "x.npy"], &["cumsum requires --out DIR"]),
        (&["run", "cumsum", "--x", "x.npy", "--out", "nowhere"], &["--out nowhere: not an existing directory"]),
        (&["run", "cumsum", "--x", "x.npy", "--out", "out", "--lnc", "4"], &["--lnc 4"]),
        (&["run", "cumsum", "--x", "x.npy", "--out", "out", "--precision", "fp64"], &["--precision fp64"]),
        (&["profile", "softmax", "--x", "short.npy", "--json"], &["--x short.npy"]),
    ];
    for (args, want) in cases {
        let before = files(&dir);
        let o = nki_in(&dir, args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        for w in *want {
            assert!(err.contains(w), "{args:?}: `{w}` missing from {err}");
        }
        assert!(files(&dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 0, "{args:?} wrote something");
    }
    let help = nki_in(&dir, &["run", "layernorm", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success() && text.contains("--eps VALUE") && text.contains("default 1e-5"), "{text}");
    let help = nki_in(&dir, &["run", "router_topk", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && text.contains("--act-fn VALUE") && text.contains("a RouterActFnType member: SIGMOID|SOFTMAX"),
        "{text}"
    );
}
