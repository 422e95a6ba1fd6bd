//! How executor-vs-emulator sweeps spend their time.
//!
//! Each case of such a test runs the emitted kernel under the NumPy executor
//! and the emulator, and the two precision modes run the same emitted code
//! with different rounding. A sweep of several cases alternates the modes
//! (even cases fp32, odd ones hardware): every case runs once and both modes
//! are covered, at half the cost. `NKI_FULL_SWEEPS=1` runs every case in both
//! modes — the slow sweep kept out of CI, for changes to the executor or to
//! an emitted kernel's rounding.

use nki::{Dtype, Precision};

/// The variable that makes every sweep run each case in both modes.
pub const FULL_SWEEPS_ENV: &str = "NKI_FULL_SWEEPS";

/// A precision mode of the executor and the emulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// float32 arithmetic (`Precision::Fp32`, the executor's `fp32`).
    Fp32,
    /// The hardware's roundings (`Precision::Hardware`, the executor's `hardware`).
    Hardware,
}

impl Mode {
    /// The emulator's precision.
    pub fn precision(self) -> Precision {
        self.run(Dtype::F32, Dtype::F32).1
    }

    /// The executor's name for the mode (`fp32`, `hardware`).
    pub fn name(self) -> &'static str {
        self.run(Dtype::F32, Dtype::F32).2
    }

    /// The inputs' dtype (`fp32` in fp32 mode, `narrow` in hardware mode),
    /// the emulator's precision and the executor's mode name.
    pub fn run(self, fp32: Dtype, narrow: Dtype) -> (Dtype, Precision, &'static str) {
        match self {
            Mode::Fp32 => (fp32, Precision::Fp32, "fp32"),
            Mode::Hardware => (narrow, Precision::Hardware, "hardware"),
        }
    }
}

/// Whether `NKI_FULL_SWEEPS` asks for every case in both modes.
pub fn full_sweeps() -> bool {
    std::env::var_os(FULL_SWEEPS_ENV).is_some_and(|v| v != "0" && !v.is_empty())
}

/// The (case, mode) runs of a sweep over `cases`: each case once, the modes
/// alternating, or every case in both modes when there is one case or under
/// `NKI_FULL_SWEEPS`.
pub fn sweep<T>(cases: impl IntoIterator<Item = T>) -> Vec<(T, Mode)>
where
    T: Clone,
{
    let cases: Vec<T> = cases.into_iter().collect();
    let both = cases.len() < 2 || full_sweeps();
    let mut runs = Vec::with_capacity(cases.len() * 2);
    for (i, case) in cases.into_iter().enumerate() {
        if both {
            runs.push((case.clone(), Mode::Fp32));
            runs.push((case, Mode::Hardware));
        } else {
            runs.push((case, if i % 2 == 0 { Mode::Fp32 } else { Mode::Hardware }));
        }
    }
    runs
}
