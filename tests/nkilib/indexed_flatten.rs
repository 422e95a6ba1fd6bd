//! The library's `indexed_flatten` against its documented semantics (row `e`'s
//! block `p` of `f_len` elements at output block `row_offsets[start + e] + p`,
//! blocks out of range skipped, `padding_val` elsewhere), over the library's
//! test configurations with and without `row_offsets_start`, on skewed
//! offsets (rows dropped past the end, rows overlapping), in both precision
//! modes; its emitted source under NumPy against the emulator; its rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{Arg, assert_refused_by, emitted_package, tensor};
use nki::{Dtype, Launch, Precision};
use nkilib::subkernels::indexed_flatten::{IndexedFlattenRule, IndexedFlattenShape, indexed_flatten, indexed_flatten_violation};

/// One call: `[E, T]` sequential values, blocks of `f_len`, the offsets and
/// the start index into them.
#[derive(Clone, Debug)]
struct Case {
    t: usize,
    e: usize,
    f_len: usize,
    output_len: usize,
    row_offsets: Vec<i64>,
    start: Option<usize>,
    padding_val: i64,
}

impl Case {
    /// The library's test: row `i` of `N` offsets at block `i·T/f_len`, an
    /// output of `N·T + 1024` elements rounded up to 128.
    fn library(t: usize, e: usize, f_len: usize, n: usize, start: Option<usize>) -> Case {
        let row_offsets = (0..n).map(|i| (i * t / f_len) as i64).collect();
        Case { t, e, f_len, output_len: (n * t + 1024).div_ceil(128) * 128, row_offsets, start, padding_val: -1 }
    }

    fn name(&self) -> String {
        format!("t{}_e{}_f{}_out{}_n{}_start{:?}", self.t, self.e, self.f_len, self.output_len, self.row_offsets.len(), self.start)
    }

    /// The library's input: `0, 1, 2, ...` row-major.
    fn input(&self) -> Vec<f64> {
        (0..self.e * self.t).map(|v| v as f64).collect()
    }

    /// The documented output, in float64, rows written in order (a later row
    /// overwrites an earlier one's block).
    fn reference(&self) -> Vec<i64> {
        let x = self.input();
        let blocks = self.output_len / self.f_len;
        let mut out = vec![self.padding_val; self.output_len];
        for row in 0..self.e {
            let base = self.row_offsets[self.start.unwrap_or(0) + row];
            for p in 0..self.t / self.f_len {
                let b = base + p as i64;
                if (0..blocks as i64).contains(&b) {
                    for j in 0..self.f_len {
                        out[b as usize * self.f_len + j] = x[row * self.t + p * self.f_len + j] as i64;
                    }
                }
            }
        }
        out
    }

    fn run(&self, lnc: usize, precision: Precision) -> Vec<i64> {
        let x = tensor(&[self.e, self.t], &self.input(), Dtype::I32);
        let offs: Vec<f64> = self.row_offsets.iter().map(|&v| v as f64).collect();
        let offsets = tensor(&[offs.len()], &offs, Dtype::I32);
        let start = self.start.map(|s| tensor(&[1], &[s as f64], Dtype::I32));
        let mut call = indexed_flatten::Call::new(&x, self.f_len as i64, self.output_len as i64, &offsets).padding_val(self.padding_val);
        if let Some(start) = &start {
            call = call.row_offsets_start(start);
        }
        call.launch(&Launch::new().lnc(lnc).precision(precision)).unwrap_or_else(|e| panic!("{}: {e}", self.name())).to_i64_vec()
    }

    fn check(&self, lnc: usize, precision: Precision) {
        let (got, want) = (self.run(lnc, precision), self.reference());
        assert_eq!(got.len(), want.len(), "{}", self.name());
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            panic!("{} lnc{lnc} {precision:?}: element {i}: {} vs {}", self.name(), got[i], want[i]);
        }
    }

    fn numpy_args(&self) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let offs = self.row_offsets.iter().map(|&v| v as f64).collect();
        let args = vec![
            Arg::Tensor(vec![self.e, self.t], self.input(), Dtype::I32),
            Arg::Int(self.f_len as i64),
            Arg::Int(self.output_len as i64),
            Arg::Tensor(vec![self.row_offsets.len()], offs, Dtype::I32),
        ];
        let start = self.start.map_or(Arg::None, |s| Arg::Tensor(vec![1], vec![s as f64], Dtype::I32));
        (args, vec![("row_offsets_start", start), ("padding_val", Arg::Int(self.padding_val))])
    }
}

/// The library's fast configurations `(T, E, f_len)`.
const LIBRARY_FAST: &[(usize, usize, usize)] = &[
    (4096, 1, 128),
    (4096, 2, 128),
    (4096, 2, 256),
    (4096, 3, 128),
    (10240, 16, 128),
    (10240, 17, 128),
    (65536, 4, 128),
    (65536, 4, 256),
    (4096, 64, 128),
    (4096, 128, 128),
    (4096, 256, 128),
];

/// The library's `row_offsets_start` configurations `(T, E, f_len, N, start)`.
const LIBRARY_START: &[(usize, usize, usize, usize, usize)] = &[(4096, 2, 128, 4, 2), (4096, 3, 128, 5, 1), (10240, 8, 128, 16, 8)];

/// Every library configuration on its two programs, in both precision modes,
/// and the small ones on one program: exactly the documented array.
#[test]
fn library_configs_match_the_documented_layout() {
    for &(t, e, f) in LIBRARY_FAST {
        let case = Case::library(t, e, f, e, None);
        case.check(2, Precision::Hardware);
        if t * e <= 65536 {
            case.check(1, Precision::Fp32);
        }
    }
    for &(t, e, f, n, start) in LIBRARY_START {
        let case = Case::library(t, e, f, n, Some(start));
        case.check(2, Precision::Fp32);
        case.check(2, Precision::Hardware);
    }
}

/// Skewed offsets: a row dropped entirely past the end, one cut at the end,
/// one before the start (negative), two rows on the same blocks (the later
/// row, or on two programs the larger values, win), and a padding of -7.
#[test]
fn skewed_offsets_drop_cut_and_overlap_rows() {
    let (t, f) = (2048, 128); // 16 blocks per row
    let case = Case { t, e: 5, f_len: f, output_len: 40 * f, row_offsets: vec![0, 1000, 30, -20, 16], start: None, padding_val: -7 };
    // Row 1 is dropped, row 2 keeps blocks 30..40, row 3 is dropped, row 4
    // overwrites blocks 16..32 of row 2's 30..32 (row 4 is on program 1 with
    // larger values, so the maximum agrees with the in-order reference).
    case.check(2, Precision::Fp32);
    case.check(1, Precision::Hardware);
    // Overlap inside one program: rows 0 and 1 (both program 0's of 3) share blocks 8..16.
    let overlap = Case { row_offsets: vec![0, 8, 40], e: 3, output_len: 64 * f, ..case.clone() };
    overlap.check(2, Precision::Fp32);
}

/// The emitted kernel under NumPy equals the emulator: odd E on two programs
/// (one row parked), with `row_offsets_start`, and dropped rows.
#[test]
fn emitted_kernel_under_numpy_equals_emulator() {
    let dropped = Case { t: 2048, e: 3, f_len: 128, output_len: 40 * 128, row_offsets: vec![0, 1000, 30], start: None, padding_val: -1 };
    for (case, m) in sweep([Case::library(4096, 3, 128, 3, None), Case::library(4096, 3, 128, 5, Some(1)), dropped]) {
        let (precision, mode) = (m.precision(), m.name());
        let emu = case.run(2, precision);
        let (args, kwargs) = case.numpy_args();
        let np = run_numpy_kwargs(emitted_package(), "indexed_flatten", &args, &kwargs, 2, mode);
        let np: Vec<i64> = np[0].iter().map(|&v| v as i64).collect();
        assert_eq!(np, emu, "{} {mode}", case.name());
    }
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn rules_refuse_by_name() {
    let ok = IndexedFlattenShape { e: 2, t: 4096, f_len: 128, output_len: 9216, n: 2, row_offsets_start: false, programs: 2 };
    assert_eq!(indexed_flatten_violation(ok), None);
    let cases = [
        (IndexedFlattenShape { f_len: 0, ..ok }, IndexedFlattenRule::FLen),
        (IndexedFlattenShape { output_len: 9000, ..ok }, IndexedFlattenRule::OutputLen),
        (IndexedFlattenShape { f_len: 512, ..ok }, IndexedFlattenRule::RowBlocks),
        (IndexedFlattenShape { t: 4000, ..ok }, IndexedFlattenRule::RowBlocks),
        (IndexedFlattenShape { n: 3, ..ok }, IndexedFlattenRule::Offsets),
        (IndexedFlattenShape { n: 1, row_offsets_start: true, ..ok }, IndexedFlattenRule::Offsets),
        (IndexedFlattenShape { programs: 4, ..ok }, IndexedFlattenRule::Programs),
    ];
    assert_refused_by(indexed_flatten_violation, cases);
    assert_eq!(indexed_flatten_violation(IndexedFlattenShape { n: 3, row_offsets_start: true, ..ok }), None);

    let x = tensor(&[2, 2048], &vec![0.0; 4096], Dtype::I32);
    let offs = tensor(&[2], &[0.0, 16.0], Dtype::I32);
    let lnc2 = Launch::new().lnc(2);
    let e = indexed_flatten::Call::new(&x, 128, 1000, &offs).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("output_len must be a positive multiple of 128 and of f_len = 128, got output_len = 1000"), "{e}");
    let e = indexed_flatten::Call::new(&x, 256, 4096, &offs).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("T / f_len a multiple of 16, got T = 2048, f_len = 256"), "{e}");
    let three = tensor(&[3], &[0.0; 3], Dtype::I32);
    let e = indexed_flatten::Call::new(&x, 128, 4096, &three).launch(&lnc2).unwrap_err();
    assert!(e.to_string().contains("got N = 3, E = 2"), "{e}");
}
