//! Strided single-precision GEMM for `nc_matmul`, whole or split into column
//! blocks over helper threads: on AVX-512 or AVX2 + FMA by this crate's
//! kernels when the rows of `b` and `c` are contiguous ([`direct`]), else
//! through `matrixmultiply`'s.

use crate::emulator::helpers::split;

#[cfg(target_arch = "x86_64")]
mod direct;

/// Columns of `c` per part when a matmul is split over helper threads: a fixed
/// block (never derived from the thread count). [`direct`]'s parts share one
/// copy of `a`, made before the split, and copy `b` a panel at a time, so a
/// part costs little more than its arithmetic; `matrixmultiply` packs `a` and
/// its share of `b` in every part, which a block this wide amortises.
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
    unsafe { product(m, k, n, a.as_ptr(), am, b.as_ptr(), bm, c.as_mut_ptr(), cm, beta) }
}

/// The microkernel that runs `nc_matmul`'s products on this CPU: one of this
/// crate's ([`direct`]) when the CPU has AVX-512 or AVX2 with FMA, else
/// `matrixmultiply`'s. What a benchmark's figures depend on most.
pub fn matmul_kernel() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if let Some(kernel) = direct::Kernel::detect() {
        return kernel.describe();
    }
    "matrixmultiply"
}

/// The contraction length up to which `matrixmultiply` accumulates every
/// element in one pass (its `S_KC`); beyond it, it adds partial sums onto `c`,
/// which [`direct`]'s kernels do not reproduce.
const ONE_PASS_K: usize = 256;

/// The [`direct`] kernel that computes a product of these layouts and `beta`
/// on this CPU, if any (else `matrixmultiply` does).
#[cfg(target_arch = "x86_64")]
fn direct_kernel(k: usize, bm: Mat, cm: Mat, beta: f32) -> Option<direct::Kernel> {
    let takes = bm.cs == 1 && cm.cs == 1 && k > 0 && k <= ONE_PASS_K && (beta == 0.0 || beta == 1.0);
    direct::Kernel::detect().filter(|_| takes)
}

/// `c = a · b + beta · c` on raw operands: by [`direct`] when the layout allows it
/// (see the module docs), else packed; the same bits either way.
///
/// # Safety
/// Every element addressed by the shapes and strides lies inside the
/// allocations behind `a`, `b` and `c`, and `c` aliases neither operand.
#[allow(clippy::too_many_arguments)]
unsafe fn product(m: usize, k: usize, n: usize, a: *const f32, am: Mat, b: *const f32, bm: Mat, c: *mut f32, cm: Mat, beta: f32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(kernel) = direct_kernel(k, bm, cm, beta) {
        let tile = direct::Tile { k, a, am, b, bm, c, cm, accumulate: beta == 1.0 };
        // SAFETY: the CPU runs the kernel, the layout is the one it takes,
        // and the caller vouches for the bounds and aliasing.
        return unsafe { kernel.sgemm(m, n, &tile) };
    }
    // SAFETY: as this function's contract.
    unsafe { packed(m, k, n, a, am, b, bm, c, cm, beta) }
}

/// [`product`] by `matrixmultiply`, whatever the layout.
///
/// # Safety
/// As [`product`].
#[allow(clippy::too_many_arguments)]
unsafe fn packed(m: usize, k: usize, n: usize, a: *const f32, am: Mat, b: *const f32, bm: Mat, c: *mut f32, cm: Mat, beta: f32) {
    // SAFETY: as this function's contract.
    unsafe {
        let (a, b, c) = (a.offset(am.offset), b.offset(bm.offset), c.offset(cm.offset));
        matrixmultiply::sgemm(m, k, n, 1.0, a, am.rs, am.cs, b, bm.rs, bm.cs, beta, c, cm.rs, cm.cs)
    }
}

/// [`sgemm`] with `c`'s columns split into blocks of [`SPLIT_COLS`] computed by
/// the caller and up to `helpers` helper threads (the whole product at once
/// without helpers, or when `c`'s rows are not contiguous runs that blocks can
/// own).
///
/// Every element of `c` is the same k-ordered f32 accumulation whichever block
/// computes it (neither [`direct`]'s kernels nor `matrixmultiply`'s depend on
/// an element's position, and `beta` is 0 or 1 here, which their edge and full
/// tiles apply identically), so the result is bit-identical to the whole product;
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
    let parts = n.div_ceil(SPLIT_COLS);
    // Part `j`'s first column and its column count.
    let block = |j: usize| ((j * SPLIT_COLS) as isize, SPLIT_COLS.min(n - j * SPLIT_COLS));
    #[cfg(target_arch = "x86_64")]
    if let Some(kernel) = direct_kernel(k, bm, cm, beta) {
        // SAFETY: `a` is in bounds for `m × k` (checked by the emulator).
        let packed = unsafe { direct::PackedA::new(m, k, a.as_ptr(), am) };
        let part = |j: usize| {
            let (first, cols) = block(j);
            // SAFETY: the CPU runs the kernel and the layout is the one it
            // takes; the block is inside the bounds-checked operands (a column
            // range of `b` and `c`), its cells of `c` belong to this part
            // alone, and `packed` is the copy of this product's `a`.
            unsafe {
                let b = b.as_ptr().offset(bm.offset + first * bm.cs);
                let c = cells.at(cm.offset + first);
                let tile = direct::Tile {
                    k,
                    a: a.as_ptr(),
                    am,
                    b,
                    bm: Mat { offset: 0, ..bm },
                    c,
                    cm: Mat { offset: 0, ..cm },
                    accumulate: beta == 1.0,
                };
                kernel.columns(cols, &tile, &packed)
            }
        };
        return split(helpers, parts, &part);
    }
    let part = |j: usize| {
        let (first, cols) = block(j);
        // SAFETY: the block is inside the bounds-checked operands (a column
        // range of `b` and `c`), and its cells of `c` belong to this part alone.
        unsafe {
            packed(
                m,
                k,
                cols,
                a.as_ptr(),
                am,
                b.as_ptr().offset(bm.offset + first * bm.cs),
                Mat { offset: 0, ..bm },
                cells.at(cm.offset + first),
                Mat { offset: 0, ..cm },
                beta,
            )
        }
    };
    split(helpers, parts, &part);
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

    /// Draws of `len` values uniform in `[-half, half)` (multiples of
    /// `2·half / 2²⁴`) from a linear congruential generator seeded `seed`.
    fn uniform(mut seed: u32, half: f32) -> impl FnMut(usize) -> Vec<f32> {
        move |len| {
            (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 8) as f32 / (1u32 << 24) as f32 * (2.0 * half) - half
                })
                .collect()
        }
    }

    #[test]
    fn the_named_kernel_is_the_widest_the_cpu_runs() {
        let name = matmul_kernel();
        #[cfg(target_arch = "x86_64")]
        {
            let want = if std::arch::is_x86_feature_detected!("avx512f") {
                "AVX-512"
            } else if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                "AVX2 + FMA"
            } else {
                "matrixmultiply"
            };
            assert!(name.starts_with(want), "{name} on a CPU whose widest is {want}");
        }
        #[cfg(not(target_arch = "x86_64"))]
        assert_eq!(name, "matrixmultiply");
    }

    #[test]
    fn split_products_are_bit_identical_to_whole_ones() {
        let mut rand = uniform(7, 0.5);
        for (m, k, n, beta) in [(128, 128, 512, 0.0), (77, 100, 500, 1.0), (128, 33, 129, 1.0), (5, 128, 384, 0.0), (300, 64, 260, 1.0)] {
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

    /// One product's operands: `a` stored k×m (the stationary tile's layout)
    /// with `a_step` between rows, `b` k×n, `c` m×n on every `c_step`th column
    /// of padded rows, each behind an offset.
    struct Case {
        m: usize,
        k: usize,
        n: usize,
        a: Vec<f32>,
        am: Mat,
        b: Vec<f32>,
        bm: Mat,
        c: Vec<f32>,
        cm: Mat,
    }

    impl Case {
        fn new(rand: &mut impl FnMut(usize) -> Vec<f32>, (m, k, n): (usize, usize, usize), a_step: usize, c_step: usize) -> Case {
            let (a, b, c) = (rand(3 + k * m * a_step), rand(5 + k * (n + 4)), rand(2 + m * (n + 9) * c_step));
            let am = Mat { offset: 3, rs: a_step as isize, cs: (m * a_step) as isize };
            let bm = Mat { offset: 5, rs: n as isize + 4, cs: 1 };
            let cm = Mat { offset: 2, rs: ((n + 9) * c_step) as isize, cs: c_step as isize };
            Case { m, k, n, a, am, b, bm, c, cm }
        }

        /// `c` after `matrixmultiply`'s packed product, called directly.
        fn packed(&self, beta: f32) -> Vec<f32> {
            let Case { m, k, n, am, bm, cm, .. } = *self;
            let mut c = self.c.clone();
            // SAFETY: the three operands are in bounds for these shapes and strides.
            unsafe {
                let (a, b) = (self.a.as_ptr().offset(am.offset), self.b.as_ptr().offset(bm.offset));
                matrixmultiply::sgemm(m, k, n, 1.0, a, am.rs, am.cs, b, bm.rs, bm.cs, beta, c.as_mut_ptr().offset(cm.offset), cm.rs, cm.cs)
            };
            c
        }
    }

    fn same_bits(x: &[f32], y: &[f32]) -> bool {
        x.iter().zip(y).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    /// Products whose row and column counts reach every tile edge of both
    /// [`direct`] kernels (1 to 12 rows, 1 to 33 columns: partial vectors,
    /// one vector, partial second vectors) and several tiles of each, with
    /// the shortest and longest contractions they take.
    fn shapes() -> impl Iterator<Item = (usize, usize, usize)> {
        let whole = [(128, 128, 512), (128, 128, 128), (100, 64, 300), (300, 48, 40), (25, 256, 33), (13, 1, 17), (1, 7, 1)];
        whole.into_iter().chain([(12, 128, 31), (11, 9, 8), (7, 5, 9), (10, 3, 16), (9, 2, 15), (8, 4, 24), (6, 11, 40), (5, 33, 7)])
    }

    /// Through the dispatcher: the products this CPU computes by [`direct`] (the
    /// route is asserted, so a CPU with a kernel cannot pass on the packed
    /// path alone) and the one it packs (every other column of `c`) match
    /// `matrixmultiply` called directly, for strided stationary rows and both
    /// `beta`s.
    #[test]
    fn products_are_bit_identical_to_packed_ones() {
        let mut rand = uniform(11, 2.0);
        let strided = shapes().map(|s| (s, 1, 1)).chain(shapes().step_by(3).map(|s| (s, 3, 1)));
        for (shape, a_step, c_step) in strided.chain([((20, 16, 24), 1, 2)]) {
            for beta in [0.0, 1.0] {
                let case = Case::new(&mut rand, shape, a_step, c_step);
                #[cfg(target_arch = "x86_64")]
                {
                    let route = direct_kernel(case.k, case.bm, case.cm, beta);
                    assert_eq!(route, if c_step == 1 { direct::Kernel::detect() } else { None }, "{shape:?}, c_step {c_step}");
                }
                let Case { m, k, n, am, bm, cm, .. } = case;
                let mut ours = case.c.clone();
                sgemm(m, k, n, &case.a, am, &case.b, bm, &mut ours, cm, beta);
                assert!(same_bits(&ours, &case.packed(beta)), "{m}x{k}x{n}, a rows {a_step} apart, c columns {c_step} apart, beta {beta}");
            }
        }
    }

    /// Every [`direct`] kernel this CPU runs (an AVX-512 one runs both), called
    /// directly, against `matrixmultiply`: the same bits for every tile edge,
    /// strided stationary rows, offsets and both `beta`s. The kernels it
    /// lacks are named on stderr rather than silently skipped.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_direct_kernel_is_bit_identical_to_packed() {
        let mut rand = uniform(13, 2.0);
        let (runs, lacks): (Vec<_>, Vec<_>) = direct::Kernel::ALL.into_iter().partition(|k| k.supported());
        if !lacks.is_empty() {
            eprintln!("this CPU lacks the direct kernels {lacks:?}: not tested here");
        }
        for kernel in runs {
            for (shape, a_step) in shapes().map(|s| (s, 1)).chain(shapes().map(|s| (s, 2))) {
                for beta in [0.0, 1.0] {
                    let case = Case::new(&mut rand, shape, a_step, 1);
                    let Case { m, k, n, am, bm, cm, .. } = case;
                    let mut ours = case.c.clone();
                    let (a, b, c) = (case.a.as_ptr(), case.b.as_ptr(), ours.as_mut_ptr());
                    let tile = direct::Tile { k, a, am, b, bm, c, cm, accumulate: beta == 1.0 };
                    // SAFETY: the CPU runs the kernel, the operands are in
                    // bounds with unit column strides, and `c` is its own buffer.
                    unsafe { kernel.sgemm(m, n, &tile) };
                    assert!(same_bits(&ours, &case.packed(beta)), "{kernel:?}: {m}x{k}x{n}, a rows {a_step} apart, beta {beta}");
                }
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
