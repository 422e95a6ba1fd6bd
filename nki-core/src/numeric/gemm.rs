//! Strided single-precision GEMM for `nc_matmul`, whole or split into column
//! blocks over helper threads.

use crate::emulator::helpers::split;

/// Columns of `c` per part when a matmul is split over helper threads: a fixed
/// block (never derived from the thread count), wide enough that each part
/// amortises packing its share of `b`.
const SPLIT_COLS: usize = 128;

/// A strided matrix operand: `elem(i, j) = data[offset + i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat {
    pub offset: isize,
    pub rs: isize,
    pub cs: isize,
}

/// `c = a · b + beta · c` with `a: m×k`, `b: k×n`, `c: m×n` (f32 accumulation).
///
/// The caller guarantees every addressed element lies inside its slice (the
/// emulator bounds-checks views before calling).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(m: usize, k: usize, n: usize, a: &[f32], am: Mat, b: &[f32], bm: Mat, c: &mut [f32], cm: Mat, beta: f32) {
    if m == 0 || n == 0 {
        return;
    }
    debug_assert!(in_bounds(a.len(), am, m, k) && in_bounds(b.len(), bm, k, n) && in_bounds(c.len(), cm, m, n));
    // SAFETY: the three operands are in bounds for the given shapes and strides
    // (checked by the emulator before the call), and `c` does not alias `a` or `b`
    // because it is borrowed mutably.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr().offset(am.offset),
            am.rs,
            am.cs,
            b.as_ptr().offset(bm.offset),
            bm.rs,
            bm.cs,
            beta,
            c.as_mut_ptr().offset(cm.offset),
            cm.rs,
            cm.cs,
        );
    }
}

/// [`sgemm`] with `c`'s columns split into blocks of [`SPLIT_COLS`] computed by
/// the caller and up to `helpers` helper threads (the whole product at once
/// without helpers, or when `c`'s rows are not contiguous runs that blocks can
/// own).
///
/// Every element of `c` is the same k-ordered f32 accumulation whichever block
/// computes it (`matrixmultiply`'s kernels do not depend on an element's
/// position, and `beta` is 0 or 1 here, which its edge and full kernels apply
/// identically), so the result is bit-identical to the whole product;
/// `tests/attention/threads.rs` checks that on whole kernels.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_split(
    helpers: usize,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    am: Mat,
    b: &[f32],
    bm: Mat,
    c: &mut [f32],
    cm: Mat,
    beta: f32,
) {
    let rows_own_columns = cm.cs == 1 && cm.rs >= n as isize;
    if helpers == 0 || n <= SPLIT_COLS || !rows_own_columns || m == 0 {
        return sgemm(m, k, n, a, am, b, bm, c, cm, beta);
    }
    debug_assert!(in_bounds(a.len(), am, m, k) && in_bounds(b.len(), bm, k, n) && in_bounds(c.len(), cm, m, n));
    /// `c`'s cells, written by the parts at disjoint column blocks.
    struct Cells(*mut f32);
    // SAFETY: each part writes only its own columns of `c` (rows own `n`
    // contiguous cells, checked above), so concurrent parts never touch the
    // same cell, and `split` returns only after every part has finished.
    unsafe impl Sync for Cells {}
    impl Cells {
        /// The cell `offset` elements from the start (borrowing the whole
        /// wrapper, so closures capture it rather than its raw pointer).
        fn at(&self, offset: isize) -> *mut f32 {
            self.0.wrapping_offset(offset)
        }
    }
    let cells = Cells(c.as_mut_ptr());
    let part = |j: usize| {
        let first = j * SPLIT_COLS;
        let cols = SPLIT_COLS.min(n - first);
        let first = first as isize;
        // SAFETY: the block is inside the bounds-checked operands (a column
        // range of `b` and `c`), and its cells of `c` belong to this part alone.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                cols,
                1.0,
                a.as_ptr().offset(am.offset),
                am.rs,
                am.cs,
                b.as_ptr().offset(bm.offset + first * bm.cs),
                bm.rs,
                bm.cs,
                beta,
                cells.at(cm.offset + first),
                cm.rs,
                cm.cs,
            );
        }
    };
    split(helpers, n.div_ceil(SPLIT_COLS), &part);
}

fn in_bounds(len: usize, mat: Mat, rows: usize, cols: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let corners =
        [0, (rows as isize - 1) * mat.rs, (cols as isize - 1) * mat.cs, (rows as isize - 1) * mat.rs + (cols as isize - 1) * mat.cs];
    corners.iter().all(|&c| mat.offset + c >= 0 && ((mat.offset + c) as usize) < len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_products_are_bit_identical_to_whole_ones() {
        let mut seed = 7u32;
        let mut rand = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                })
                .collect()
        };
        for (m, k, n, beta) in [(128, 128, 512, 0.0), (77, 100, 500, 1.0), (128, 33, 129, 1.0), (5, 128, 384, 0.0)] {
            // a stored k×m (the stationary tile's layout), b k×n, c m×n with padded rows.
            let (a, b, c0) = (rand(k * m), rand(k * n), rand(m * (n + 3)));
            let (am, bm) = (Mat { offset: 0, rs: 1, cs: m as isize }, Mat { offset: 0, rs: n as isize, cs: 1 });
            let cm = Mat { offset: 0, rs: n as isize + 3, cs: 1 };
            let mut whole = c0.clone();
            sgemm(m, k, n, &a, am, &b, bm, &mut whole, cm, beta);
            for helpers in [1, 3] {
                let mut parts = c0.clone();
                sgemm_split(helpers, m, k, n, &a, am, &b, bm, &mut parts, cm, beta);
                let same = whole.iter().zip(&parts).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m}x{k}x{n} beta {beta}, {helpers} helpers");
            }
        }
    }

    #[test]
    fn transposed_a_matches_naive() {
        let (m, k, n) = (3, 4, 5);
        let a: Vec<f32> = (0..k * m).map(|i| i as f32 * 0.5).collect(); // stored k×m
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32).collect();
        let mut c = vec![1.0f32; m * n];
        sgemm(
            m,
            k,
            n,
            &a,
            Mat { offset: 0, rs: 1, cs: m as isize },
            &b,
            Mat { offset: 0, rs: n as isize, cs: 1 },
            &mut c,
            Mat { offset: 0, rs: n as isize, cs: 1 },
            1.0,
        );
        for i in 0..m {
            for j in 0..n {
                let want: f32 = 1.0 + (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum::<f32>();
                assert_eq!(c[i * n + j], want);
            }
        }
    }
}
