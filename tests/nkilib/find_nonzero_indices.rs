//! The library's `find_nonzero_indices` against the documented semantics (for
//! each column, the ascending positions of its nonzero elements along `T`, -1
//! after them, and their count), over the library's test configurations with
//! and without `col_start_id`, on skewed masks (empty and full columns), in
//! both precision modes; its emitted source under NumPy against the emulator;
//! its rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{Arg, assert_refused_by, emitted_package, seed_of, tensor};
use nki::{Dtype, Launch, Precision};
use nkilib::subkernels::find_nonzero_indices::{FindNonzeroRule, FindNonzeroShape, find_nonzero_indices, find_nonzero_indices_violation};

/// One call: the input's shape, how many tokens each column routes on
/// average, the column window and the chunk size.
#[derive(Clone, Copy, Debug)]
struct Config {
    t: usize,
    e: usize,
    top_k: usize,
    /// `(col_start_id, n_cols)`.
    window: Option<(usize, usize)>,
    chunk_size: usize,
    dtype: Dtype,
}

const fn full(t: usize, e: usize, top_k: usize, chunk_size: usize, dtype: Dtype) -> Config {
    Config { t, e, top_k, window: None, chunk_size, dtype }
}

const fn subset(t: usize, e: usize, top_k: usize, start: usize, n: usize, chunk_size: usize, dtype: Dtype) -> Config {
    Config { t, e, top_k, window: Some((start, n)), chunk_size, dtype }
}

/// The library's `test_find_nonzero_indices.py` configurations at `T = 4096`
/// and `10240` (all LNC2; the `T = 65536` ones are in [`LARGE_CONFIGS`]).
const LIBRARY_CONFIGS: &[Config] = &[
    full(4096, 128, 8, 4096, Dtype::I32),
    full(4096, 128, 8, 4096, Dtype::F32),
    full(10240, 128, 4, 10240, Dtype::I32),
    full(10240, 128, 4, 10240, Dtype::F32),
    subset(4096, 128, 8, 0, 4, 4096, Dtype::I32),
    subset(4096, 128, 8, 0, 4, 4096, Dtype::F32),
    subset(10240, 128, 4, 16, 16, 10240, Dtype::I32),
    subset(10240, 128, 4, 16, 16, 10240, Dtype::F32),
    subset(10240, 128, 4, 120, 8, 10240, Dtype::F32),
];

/// The library's `T = 65536` configurations (four chunks of 16384).
const LARGE_CONFIGS: &[Config] = &[
    full(65536, 128, 4, 16384, Dtype::I32),
    full(65536, 128, 4, 16384, Dtype::F32),
    subset(65536, 128, 4, 32, 16, 16384, Dtype::I32),
    subset(65536, 128, 4, 32, 16, 16384, Dtype::F32),
];

impl Config {
    fn name(&self) -> String {
        format!("t{}_e{}_k{}_{:?}_chunk{}_{:?}", self.t, self.e, self.top_k, self.window, self.chunk_size, self.dtype)
    }

    /// The library's sparsity: each column gets `T·top_k/E` ones on average
    /// (a random permutation of that many ones over the whole `[T, E]`), as
    /// 1 (int32) or 0.1 (float32).
    fn input(&self) -> Vec<f64> {
        let (t, e) = (self.t, self.e);
        let ones = t * self.top_k / e * e;
        let mut state = seed_of(&self.name()) | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut cells: Vec<usize> = (0..t * e).collect();
        for i in (1..cells.len()).rev() {
            cells.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let hit = if self.dtype == Dtype::F32 { 0.1 } else { 1.0 };
        let mut x = vec![0.0; t * e];
        for &cell in &cells[..ones] {
            x[cell] = hit;
        }
        x
    }

    /// The emulator's `(indices, nonzero_counts)` on `lnc` programs.
    fn run(&self, x: &[f64], lnc: usize, precision: Precision) -> (Vec<i64>, Vec<i64>) {
        let xt = tensor(&[self.t, self.e], x, self.dtype);
        let start = self.window.map(|(s, _)| tensor(&[1], &[s as f64], Dtype::I32));
        let mut call = find_nonzero_indices::Call::new(&xt).chunk_size(self.chunk_size as i64);
        if let (Some(start), Some((_, n))) = (&start, self.window) {
            call = call.col_start_id(start).n_cols(n as i64);
        }
        let out = call.launch(&Launch::new().lnc(lnc).precision(precision)).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        (out.0[0].to_i64_vec(), out.0[1].to_i64_vec())
    }

    /// The searched columns.
    fn columns(&self) -> std::ops::Range<usize> {
        self.window.map_or(0..self.e, |(s, n)| s..s + n)
    }

    fn check(&self, x: &[f64], lnc: usize, precision: Precision) {
        let (want_idx, want_cnt) = reference(x, self.t, self.e, self.columns());
        let (idx, cnt) = self.run(x, lnc, precision);
        assert_eq!(cnt, want_cnt, "{} lnc{lnc} {precision:?}: counts", self.name());
        for (c, (got, want)) in idx.chunks(self.t).zip(want_idx.chunks(self.t)).enumerate() {
            assert_eq!(got, want, "{} lnc{lnc} {precision:?}: indices of column {c}", self.name());
        }
    }
}

/// For each column in `columns` of the row-major `[t, e]` mask: its nonzero
/// positions ascending then -1 (`[n, t]`), and their counts (`[n]`).
fn reference(x: &[f64], t: usize, e: usize, columns: std::ops::Range<usize>) -> (Vec<i64>, Vec<i64>) {
    let (mut indices, mut counts) = (Vec::new(), Vec::new());
    for c in columns {
        let hits: Vec<i64> = (0..t).filter(|&r| x[r * e + c] != 0.0).map(|r| r as i64).collect();
        counts.push(hits.len() as i64);
        indices.extend(hits.iter().copied().chain(std::iter::repeat_n(-1, t - hits.len())));
    }
    (indices, counts)
}

/// Every library configuration at `T <= 10240`, on the library's two programs
/// and on one, in both precision modes: exactly the documented output.
#[test]
fn library_configs_match_the_documented_indices_and_counts() {
    for cfg in LIBRARY_CONFIGS {
        let x = cfg.input();
        cfg.check(&x, 2, Precision::Fp32);
        cfg.check(&x, 2, Precision::Hardware);
    }
    let cfg = LIBRARY_CONFIGS[0];
    cfg.check(&cfg.input(), 1, Precision::Fp32);
}

/// The library's `T = 65536` configurations: four chunks, each written at the
/// column's running count.
#[test]
fn library_configs_of_65536_tokens_in_chunks() {
    for cfg in LARGE_CONFIGS {
        cfg.check(&cfg.input(), 2, Precision::Hardware);
    }
}

/// Skewed routing: every token in one column, columns with no token, a column
/// whose hits all fall in the last chunk, and a window that starts past the
/// first round; in chunks and whole.
#[test]
fn skewed_masks_all_tokens_in_one_column_and_empty_columns() {
    let (t, e) = (1024, 24);
    let mut x = vec![0.0; t * e];
    for r in 0..t {
        x[r * e + 3] = 1.0; // every token
        if r >= 768 && r % 5 == 0 {
            x[r * e + 17] = 2.0; // only the last chunk of 256
        }
        if r % 97 == 0 {
            x[r * e + 22] = -1.0;
        }
    }
    for chunk_size in [256, 1024] {
        let cfg = full(t, e, 1, chunk_size, Dtype::I32);
        cfg.check(&x, 2, Precision::Fp32);
        cfg.check(&x, 1, Precision::Hardware);
        subset(t, e, 1, 2, 18, chunk_size, Dtype::I32).check(&x, 2, Precision::Fp32);
    }
    let xf: Vec<f64> = x.iter().map(|v| v * 0.25).collect();
    full(t, e, 1, 512, Dtype::F32).check(&xf, 2, Precision::Hardware);
}

/// The emitted kernel under NumPy equals the emulator: the whole input in one
/// chunk, and a window in four chunks, on two programs.
#[test]
fn emitted_kernel_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([full(1024, 32, 4, 1024, Dtype::F32), subset(2048, 64, 8, 8, 12, 512, Dtype::I32)]) {
        let x = cfg.input();
        let (precision, mode) = (m.precision(), m.name());
        let (idx, cnt) = cfg.run(&x, 2, precision);
        let args = [Arg::Tensor(vec![cfg.t, cfg.e], x.clone(), cfg.dtype)];
        let mut kwargs = vec![("chunk_size", Arg::Int(cfg.chunk_size as i64))];
        if let Some((s, n)) = cfg.window {
            kwargs.push(("col_start_id", Arg::Tensor(vec![1], vec![s as f64], Dtype::I32)));
            kwargs.push(("n_cols", Arg::Int(n as i64)));
        }
        let np = run_numpy_kwargs(emitted_package(), "find_nonzero_indices", &args, &kwargs, 2, mode);
        let as_i64 = |v: &[f32]| v.iter().map(|&f| f as i64).collect::<Vec<_>>();
        assert_eq!(as_i64(&np[0]), idx, "{} {mode}: indices", cfg.name());
        assert_eq!(as_i64(&np[1]), cnt, "{} {mode}: counts", cfg.name());
    }
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn rules_refuse_by_name() {
    let ok = FindNonzeroShape { t: 4096, c: 128, chunk_size: 1024, col_start: false, n_cols: 0, programs: 2 };
    assert_eq!(find_nonzero_indices_violation(ok), None);
    let cases = [
        (FindNonzeroShape { t: 4000, ..ok }, FindNonzeroRule::Tokens),
        (FindNonzeroShape { chunk_size: 1536, ..ok }, FindNonzeroRule::ChunkSize),
        (FindNonzeroShape { chunk_size: 100, ..ok }, FindNonzeroRule::ChunkSize),
        (FindNonzeroShape { col_start: true, ..ok }, FindNonzeroRule::ColStartNeedsNCols),
        (FindNonzeroShape { col_start: true, n_cols: 129, ..ok }, FindNonzeroRule::Columns),
        (FindNonzeroShape { col_start: true, n_cols: 5, ..ok }, FindNonzeroRule::ColumnShards),
        (FindNonzeroShape { c: 7, ..ok }, FindNonzeroRule::ColumnShards),
    ];
    assert_refused_by(find_nonzero_indices_violation, cases);
    assert_eq!(find_nonzero_indices_violation(FindNonzeroShape { c: 7, programs: 1, ..ok }), None);

    let x = tensor(&[256, 8], &[0.0; 2048], Dtype::I32);
    let lnc2 = Launch::new().lnc(2);
    let e = find_nonzero_indices::Call::new(&x).chunk_size(96).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("chunk_size must be a positive multiple of 128 that divides T = 256, got chunk_size = 96"), "{e}");
    let start = tensor(&[1], &[0.0], Dtype::I32);
    let e = find_nonzero_indices::Call::new(&x).col_start_id(&start).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("col_start_id needs n_cols"), "{e}");
    let e = find_nonzero_indices::Call::new(&x).col_start_id(&start).n_cols(3).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("got 3 columns for 2 programs"), "{e}");
    let e = find_nonzero_indices::Call::new(&x).index_dtype(Dtype::U32).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("index_dtype must be int32 or float32"), "{e}");
    let bad = tensor(&[256, 8], &[0.0; 2048], Dtype::Bf16);
    let e = find_nonzero_indices::Call::new(&bad).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("input_tensor"), "{e}");
}
